"""What the memory inspector (``/ui`` on ``pmem serve``, docs/inspector.md) reads beyond the plain API.

An :class:`Inspection` is one namespace of an open store, already checked against the caller's
credential by :meth:`~pmem.adapters.service.guarded.GuardedStore.inspection` (the one place the policy
lives). It answers four questions the page needs and the other routes cannot answer without shipping
the whole log or the whole frontier to the browser:

- the events (receipts) of one cell: the op requested, the op applied, the reason, evidence text;
- which cells' heads differ between event N and event M;
- the frontier filtered (contested only, changed since N, node type), one page at a time;
- the graph neighbourhood of a cell or an entity, a few hops out, each entity with its cells' keys.

Results are plain JSON-able dicts, like every other guarded read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pmem.adapters.eventstore.stored_log import object_dict
from pmem.domain.errors import InvalidOperation
from pmem.domain.keys import cell_id
from pmem.domain.operations import checked_count
from pmem.projections.graph import EntityGraph, entity_slug, split_key

if TYPE_CHECKING:
    from pmem.adapters.service.store import Store
    from pmem.domain.views import CellView

MAX_DEPTH = 3
MAX_NODES = 60  # a neighbourhood larger than this is cut, nearest first: labels must stay readable
NODE_TYPES = ("relationship", "event", "persona")
FILTERED_READ = 2_000  # cells read per round while a filter looks for a page
KEPT = 50  # the largest k of the inspector's next route


class Inspection:
    """One namespace of ``store`` as the inspector reads it."""

    def __init__(self, store: Store, namespace: str) -> None:
        self.store, self.namespace = store, namespace

    def summary(self) -> dict[str, Any]:
        """The namespace and the newest event index (the time slider's end)."""
        return {"namespace": self.namespace, "last_index": self.store.last_index()}

    def cell_events(self, key: str, as_of: int | None = None) -> dict[str, Any]:
        """Every event of the cell ``key`` up to ``as_of``, oldest first, as ``pmem log`` shows them."""
        k = self.store.history(key, as_of=as_of, namespace=self.namespace).key  # the key as the store names it
        cid = cell_id(self.namespace, k)
        events = sorted(self.store.log_store.cell_events([cid], upto=as_of).get(cid, []), key=lambda e: e[0])
        return {"key": k, "namespace": self.namespace, "events": [object_dict(i, e) for i, e in events]}

    def changes(self, since: int, until: int | None = None, limit: int = 100) -> dict[str, Any]:
        """Cells whose head (value or status) as of ``until`` (None: now) differs from as of ``since``."""
        since = checked_count(since, "since", "an event index")
        limit = checked_count(limit, "limit", "a positive number of cells", minimum=1)
        before = {c.key: c for c in self.store.frontier(as_of=since, namespace=self.namespace)}
        after = {c.key: c for c in self.store.frontier(as_of=until, namespace=self.namespace)}
        changed = [{"key": k, "before": _head(before.get(k)), "after": _head(after.get(k))}
                   for k in sorted(before.keys() | after.keys()) if _head(before.get(k)) != _head(after.get(k))]
        return {"since": since, "until": until, "count": len(changed), "cells": changed[:limit]}

    def frontier(self, as_of: int | None = None, *, contested: bool = False, since: int | None = None,
                 node_type: str | None = None, cursor: str | None = None, limit: int = 100) -> dict[str, Any]:
        """One page of the frontier by key, filtered: contested cells only, cells whose head changed
        after ``since``, cells whose fact has ``node_type``; ``{"cells", "next_cursor"}``."""
        limit = checked_count(limit, "limit", "a positive page size", minimum=1)
        if node_type is not None and node_type not in NODE_TYPES:
            raise InvalidOperation(f"node_type must be one of {', '.join(NODE_TYPES)}, got {node_type!r}",
                                   field="node_type")
        keep = self._filter(as_of, contested, since, node_type)
        page: list[CellView] = []
        after = cursor
        size = limit + 1 if not (contested or since is not None or node_type) else max(limit + 1, FILTERED_READ)
        while len(page) <= limit:  # read the store a page at a time until one more than a page is kept
            cells = self.store.frontier(as_of=as_of, namespace=self.namespace, after=after, limit=size)
            page += [c for c in cells if keep(c)]
            if len(cells) < size:
                break
            after = cells[-1].key
        return {"cells": [c.to_dict() for c in page[:limit]],
                "next_cursor": page[limit - 1].key if len(page) > limit else None}

    def _filter(self, as_of: int | None, contested: bool, since: int | None,
                node_type: str | None) -> Callable[[CellView], bool]:
        """Which cells the frontier view keeps; the sets behind ``since`` and ``node_type`` are read once."""
        changed = None if since is None else {c["key"] for c in self.changes(since, as_of, limit=10**9)["cells"]}
        typed = None if node_type is None else {
            f.key for f in self.store.graph(as_of=as_of, namespace=self.namespace).facts() if f.node_type == node_type}
        return lambda c: ((not contested or c.status == "contested") and (changed is None or c.key in changed)
                          and (typed is None or c.key in typed))

    def neighbourhood(self, of: str, as_of: int | None = None, depth: int = 1) -> dict[str, Any]:
        """The entities within ``depth`` hops of ``of`` (a cell's key: its subject and value; else an
        entity), the edges among them, and each entity's cells; nearest first, at most 60 entities."""
        depth = checked_count(depth, "depth", f"a number of hops from 1 to {MAX_DEPTH}", minimum=1)
        if depth > MAX_DEPTH:
            raise InvalidOperation(f"depth must be a number of hops from 1 to {MAX_DEPTH}, got {depth}",
                                   field="depth")
        start = self._starts(of, as_of)
        hops = {s: 0 for s in start}
        level = list(start)
        for d in range(depth):  # breadth first, one read of the graph's rows per ring
            if not level or len(hops) >= MAX_NODES:
                break
            near = _adjacent(self.store.graph_around(level, as_of=as_of, namespace=self.namespace))
            nxt = []
            for s in level:
                for n in sorted(near.get(s, ())):
                    if n not in hops and len(hops) < MAX_NODES:
                        hops[n] = d + 1
                        nxt.append(n)
            level = nxt
        g = self.store.graph_around(hops, as_of=as_of, namespace=self.namespace)  # exact for every shown node
        return {"of": of, "as_of": as_of, "start": start, "nodes": _nodes(g, hops),
                "edges": _edges(g, set(hops)), "truncated": len(hops) >= MAX_NODES}

    def _starts(self, of: str, as_of: int | None) -> list[str]:
        """The entities a neighbourhood starts from: a cell's subject and its value's entity, or one entity."""
        subject = split_key(of)[0]
        g = self.store.graph_around([subject, entity_slug(subject)], as_of=as_of, namespace=self.namespace)
        facts = [f for f in g.facts() if f.key == of]
        if facts:
            return sorted({s for f in facts for s in (f.subject, f.obj) if s in g.entities})
        slug = entity_slug(subject)
        return [slug] if slug in g.entities else []


def _head(c: CellView | None) -> dict[str, Any] | None:
    return None if c is None or c.value is None else {"value": c.value, "status": c.status}


def _adjacent(g: EntityGraph) -> dict[str, set[str]]:
    """Each entity's neighbours over both edge families, undirected."""
    near: dict[str, set[str]] = {}
    for a, b in g.prerequisites | g.associations:
        near.setdefault(a, set()).add(b)
        near.setdefault(b, set()).add(a)
    return near


def _nodes(g: EntityGraph, hops: dict[str, int]) -> list[dict[str, Any]]:
    out = []
    for slug, hop in hops.items():
        e = g.entities[slug]
        out.append({"id": slug, "label": e.text, "kind": e.kind, "hops": hop, "confirmed": e.confirmed,
                    "cells": sorted(f.key for f in e.facts),
                    "contested": sorted(f.key for f in e.facts if f.status == "contested")})
    return out


def _edges(g: EntityGraph, shown: set[str]) -> list[dict[str, str]]:
    edges = [{"src": a, "dst": b, "kind": "prerequisite"} for a, b in sorted(g.prerequisites)
             if a in shown and b in shown]
    edges += [{"src": a, "dst": b, "kind": "association"} for a, b in sorted(g.associations)
              if a in shown and b in shown]
    return edges
