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

from collections import deque
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
        cells = self.store.frontier(as_of=as_of, namespace=self.namespace)
        if contested:
            cells = [c for c in cells if c.status == "contested"]
        if since is not None:
            then = {c["key"] for c in self.changes(since, as_of, limit=10**9)["cells"]}
            cells = [c for c in cells if c.key in then]
        if node_type is not None:
            typed = {f.key for f in self.store.graph(as_of=as_of, namespace=self.namespace).facts()
                     if f.node_type == node_type}
            cells = [c for c in cells if c.key in typed]
        if cursor is not None:
            cells = [c for c in cells if c.key > cursor]
        page = cells[:limit]
        return {"cells": [c.to_dict() for c in page], "next_cursor": page[-1].key if len(cells) > limit else None}

    def neighbourhood(self, of: str, as_of: int | None = None, depth: int = 1) -> dict[str, Any]:
        """The entities within ``depth`` hops of ``of`` (a cell's key: its subject and value; else an
        entity), the edges among them, and each entity's cells; nearest first, at most 60 entities."""
        depth = checked_count(depth, "depth", f"a number of hops from 1 to {MAX_DEPTH}", minimum=1)
        if depth > MAX_DEPTH:
            raise InvalidOperation(f"depth must be a number of hops from 1 to {MAX_DEPTH}, got {depth}",
                                   field="depth")
        g = self.store.graph(as_of=as_of, namespace=self.namespace)
        start = _starts(g, of)
        hops = _hops(g, start, depth)
        return {"of": of, "as_of": as_of, "start": start, "nodes": _nodes(g, hops),
                "edges": _edges(g, set(hops)), "truncated": len(hops) >= MAX_NODES}


def _head(c: CellView | None) -> dict[str, Any] | None:
    return None if c is None or c.value is None else {"value": c.value, "status": c.status}


def _starts(g: EntityGraph, of: str) -> list[str]:
    """The entities a neighbourhood starts from: a cell's subject and its value's entity, or one entity."""
    facts = [f for f in g.facts() if f.key == of]
    if facts:
        return sorted({s for f in facts for s in (f.subject, f.obj) if s in g.entities})
    slug = entity_slug(split_key(of)[0]) if "." in of else entity_slug(of)
    return [slug] if slug in g.entities else []


def _hops(g: EntityGraph, start: list[str], depth: int) -> dict[str, int]:
    """Breadth-first distances from ``start`` over both edge families, undirected, cut at MAX_NODES."""
    near: dict[str, set[str]] = {}
    for a, b in g.prerequisites | g.associations:
        near.setdefault(a, set()).add(b)
        near.setdefault(b, set()).add(a)
    hops = {s: 0 for s in start}
    todo = deque(start)
    while todo and len(hops) < MAX_NODES:
        s = todo.popleft()
        if hops[s] >= depth:
            continue
        for n in sorted(near.get(s, ())):
            if n not in hops and len(hops) < MAX_NODES:
                hops[n] = hops[s] + 1
                todo.append(n)
    return hops


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
