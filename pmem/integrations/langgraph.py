"""A LangGraph store on P-Mem: ``PMemStore``, a ``langgraph.store.base.BaseStore`` (the ``langgraph`` extra).

    from pmem.integrations.langgraph import PMemStore
    store = PMemStore(pmem.open("mem.db"))           # or a remote store with the same methods
    graph = builder.compile(store=store)

Every item is one P-Mem cell of the store's namespace (docs/integrations.md#langgraph): the item
``("users", "alice")`` / ``"home"`` is the key ``users.alice.home``, and the cell's value is the item's
JSON with its namespace, key and times. A put is an ``accept``, a delete ``revoke``s the cell until it
is empty, so every earlier value stays readable: ``as_of`` and ``history``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from pmem.domain.errors import MissingExtra
from pmem.domain.views import CellView, History
from pmem.integrations._store import StoreLike, label, page_through, revokes_to_empty

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        Item,
        ListNamespacesOp,
        MatchCondition,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
    )
    from langgraph.store.base.embed import get_text_at_path
except ImportError as e:  # the optional part: name the extra that provides it
    raise MissingExtra("langgraph", "langgraph") from e

SOURCE = "langgraph"
# A query search asks P-Mem for this many cells first, and for twice as many while filters leave too few.
FIRST_K = 50


def cell_key(namespace: tuple[str, ...], key: str = "") -> str:
    """``("users", "alice")``, ``"home"`` -> ``users.alice.home``; without a key, the prefix of the
    namespace's cells (``users.alice.``; ``""`` for the empty namespace)."""
    parts = [label(p) for p in namespace]
    return ".".join([*parts, label(key)]) if key else "".join(p + "." for p in parts)


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _decode(cell: CellView) -> dict[str, Any] | None:
    """The stored item of a cell, or None for a cell this store did not write."""
    try:
        item = json.loads(cell.value or "")
    except json.JSONDecodeError:
        return None
    if not isinstance(item, dict) or not {"namespace", "key", "value", "created_at", "updated_at"} <= item.keys():
        return None
    return item


def _item(stored: dict[str, Any]) -> Item:
    return Item(value=stored["value"], key=stored["key"], namespace=tuple(stored["namespace"]),
                created_at=datetime.fromisoformat(stored["created_at"]),
                updated_at=datetime.fromisoformat(stored["updated_at"]))


def _found(stored: dict[str, Any], score: float | None) -> SearchItem:
    item = _item(stored)
    return SearchItem(item.namespace, item.key, item.value, item.created_at, item.updated_at, score)


def matches(value: Mapping[str, Any], where: Mapping[str, Any] | None) -> bool:
    """LangGraph's ``filter``: each field equals the given value, or meets every ``$eq``, ``$ne``, ``$gt``,
    ``$gte``, ``$lt``, ``$lte`` of an operator dict; a dotted field reads nested dicts."""
    for field, wanted in (where or {}).items():
        have: Any = value
        for part in field.split("."):
            have = have.get(part) if isinstance(have, Mapping) else None
        tests = wanted if isinstance(wanted, Mapping) and all(str(k).startswith("$") for k in wanted) \
            else {"$eq": wanted}
        if not all(_compare(have, op, target) for op, target in tests.items()):
            return False
    return True


def _compare(have: Any, op: str, target: Any) -> bool:
    if op in ("$eq", "$ne"):
        return bool(have == target) == (op == "$eq")
    try:
        return bool({"$gt": have > target, "$gte": have >= target, "$lt": have < target,
                     "$lte": have <= target}[op])
    except TypeError:  # None or mixed types: no order, so no match
        return False
    except KeyError:
        raise ValueError(f"filter: unknown operator {op!r}") from None


def namespace_matches(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    """A LangGraph match condition: ``prefix`` or ``suffix`` paths, ``"*"`` matching any one label."""
    path = tuple(condition.path)
    if len(path) > len(namespace):
        return False
    part = namespace[:len(path)] if condition.match_type == "prefix" else namespace[len(namespace) - len(path):]
    return all(p in ("*", n) for p, n in zip(path, part, strict=True))


class PMemStore(BaseStore):
    """A LangGraph store whose items are P-Mem cells of ``namespace`` (the store's own by default) in
    ``store``, a ``pmem.Store`` or a remote store with its methods. Writes carry ``source`` and ``trust``."""

    __slots__ = ("store", "namespace", "source", "trust")

    def __init__(self, store: StoreLike, *, namespace: str | None = None, source: str = SOURCE,
                 trust: int | None = None) -> None:
        self.store = store
        self.namespace = namespace
        self.source = source
        self.trust = trust

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order; each run of consecutive puts is one atomic P-Mem batch."""
        results: list[Result] = []
        puts: list[PutOp] = []
        for op in ops:
            if isinstance(op, PutOp):
                puts.append(op)
                results.append(None)
                continue
            self._put(puts)
            puts = []
            results.append(self._one(op))
        self._put(puts)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """``batch`` in a worker thread: the store's calls block."""
        return await asyncio.to_thread(self.batch, list(ops))

    def as_of(self, namespace: tuple[str, ...], key: str, event_index: int) -> Item | None:
        """The item as it was right after P-Mem event ``event_index`` (None where it did not exist)."""
        stored = _decode(self.store.get(cell_key(namespace, key), as_of=event_index, namespace=self.namespace))
        return _item(stored) if stored else None

    def history(self, namespace: tuple[str, ...], key: str) -> History:
        """Every version the item's cell has held, deleted ones included (``status`` ``revoked``)."""
        return self.store.history(cell_key(namespace, key), namespace=self.namespace)

    def _one(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            stored = _decode(self.store.get(cell_key(op.namespace, op.key), namespace=self.namespace))
            return _item(stored) if stored else None
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        raise ValueError(f"PMemStore.batch: unknown operation {type(op).__name__}")

    def _put(self, puts: list[PutOp]) -> None:
        """One ``apply``: an ``accept`` of each item's JSON, ``revoke``s that empty each deleted cell (a
        delete of a cell this run already wrote first applies what came before it)."""
        keys = [cell_key(p.namespace, p.key) for p in puts]
        now = self.store.get_many(keys, namespace=self.namespace) if puts else {}
        created: dict[str, str | None] = {}
        ops: list[dict[str, Any]] = []
        for put, key in zip(puts, keys, strict=True):
            if put.value is None:
                if any(o["key"] == key for o in ops):
                    ops = self._apply(ops)
                history = self.store.history(key, namespace=self.namespace)
                ops += [{"op": "revoke", "key": key, **self._evidence()}] * revokes_to_empty(history)
                created[key] = None
                continue
            before = _decode(now[key]) if key in now else None
            stamp = _now()
            first = created[key] if key in created else before["created_at"] if before else None
            created[key] = first or stamp
            stored = {"namespace": list(put.namespace), "key": put.key, "value": dict(put.value),
                      "created_at": created[key], "updated_at": stamp}
            ops.append({"op": "accept", "key": key, "value": json.dumps(stored, ensure_ascii=False),
                        **_text(put), **self._evidence()})
        self._apply(ops)

    def _evidence(self) -> dict[str, Any]:
        return {"source": self.source, **({"trust": self.trust} if self.trust is not None else {})}

    def _apply(self, ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Write ``ops`` as one atomic batch; returns a fresh, empty list for the next ones."""
        if ops:
            self.store.apply([{**o, "namespace": self.namespace} if self.namespace else o for o in ops])
        return []

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = cell_key(op.namespace_prefix)
        wanted = op.offset + op.limit
        if op.query:
            found = self._query(op.query, prefix, op.filter, wanted)
        else:
            found = [(s, 0.0) for s in self._scan(prefix) if matches(s["value"], op.filter)]
            found.sort(key=lambda pair: pair[0]["updated_at"], reverse=True)
        return [_found(s, score if op.query else None) for s, score in found[op.offset:wanted]]

    def _query(self, query: str, prefix: str, where: dict[str, Any] | None,
               wanted: int) -> list[tuple[dict[str, Any], float]]:
        """Hybrid search, asking for more cells while the namespace prefix and filter leave too few."""
        k = max(FIRST_K, 2 * wanted)
        while True:
            results = self.store.search(query, k, namespace=self.namespace)
            found = [(s, r.score) for r in results if r.cell.key.startswith(prefix)
                     and (s := _decode(r.cell)) is not None and matches(s["value"], where)]
            if len(found) >= wanted or len(results) < k:
                return found
            k *= 4

    def _scan(self, prefix: str) -> Iterable[dict[str, Any]]:
        """The stored items whose keys start with ``prefix``, read a page of cells at a time from the
        first key after it (``.`` sorts before every other character a key holds)."""
        for cell in page_through(self.store, self.namespace, after=prefix.rstrip(".") or None):
            if not cell.key.startswith(prefix):
                if cell.key > prefix:
                    return
                continue
            stored = _decode(cell)
            if stored is not None:
                yield stored

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        seen: set[tuple[str, ...]] = set()
        for stored in self._scan(""):
            ns = tuple(stored["namespace"])
            if all(namespace_matches(ns, c) for c in op.match_conditions or ()):
                seen.add(ns[:op.max_depth] if op.max_depth is not None else ns)
        return sorted(seen)[op.offset:op.offset + op.limit]


def _text(put: PutOp) -> dict[str, str]:
    """The evidence text P-Mem's lexical channel indexes: the fields ``index`` names (all by default;
    none with ``index=False``)."""
    if put.index is False or put.value is None:
        return {}
    texts = [t for path in put.index for t in get_text_at_path(put.value, path)] if put.index \
        else [json.dumps(put.value, ensure_ascii=False)]
    text = " ".join(t for t in texts if t)
    return {"text": text} if text else {}
