"""The public Python API: open a store, apply typed operations, read with ``as_of``.

    >>> import pmem
    >>> with pmem.open("mem.db") as store:
    ...     store.accept("5K PB", "27:12", source="coach")
    ...     store.accept("5K PB", "25:50", source="race results")
    ...     store.get("5K PB").value                 # '25:50'
    ...     store.history("5K PB").versions[0].status  # 'superseded'

Every write returns a :class:`~domain.views.Receipt`; every read accepts ``as_of`` (an event index).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from adapters.eventlog import EventLog
from domain.errors import InvalidBatch, InvalidOperation
from domain.keys import cell_id, normalize_key
from domain.operations import DEFAULT_NAMESPACE, DEFAULT_TRUST, Evidence, Operation, parse_operation
from domain.views import CellView, History, Receipt
from projections.replay import ReplayReader, empty_view, fold

DISCLOSURES = frozenset({"history", "alternatives", "support"})


class Store:
    """A P-Mem store on one SQLite file (or ``":memory:"``), scoped to a default namespace."""

    def __init__(self, path: str | Path = "pmem.db", *, namespace: str = DEFAULT_NAMESPACE,
                 synchronous: str | None = None) -> None:
        sync = synchronous or os.environ.get("PMEM_SYNCHRONOUS", "FULL")
        self.namespace = namespace
        self.log_store = EventLog(path, synchronous=sync)
        self.reader = ReplayReader(self.log_store)

    # -- lifecycle -----------------------------------------------------------
    def close(self) -> None:
        self.log_store.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    # -- writing -------------------------------------------------------------
    def apply(self, operations: Iterable[Operation | Mapping[str, Any]]) -> list[Receipt]:
        """Validate every operation, then record them all atomically. A bad one raises
        :class:`InvalidBatch` naming its (1-based) position, and nothing is written."""
        ops: list[Operation] = []
        for n, item in enumerate(operations, 1):
            if isinstance(item, Operation):
                ops.append(item)
                continue
            try:
                ops.append(parse_operation(item, self.namespace))
            except InvalidOperation as e:
                raise InvalidBatch(str(e), line=n, field=e.field) from None
        return self.log_store.execute(ops)

    def _one(self, op: str, key: str, value: str | None, **fields: Any) -> Receipt:
        d: dict[str, Any] = {"op": op, "key": key, **{k: v for k, v in fields.items() if v is not None}}
        if value is not None:
            d["new_value" if op == "revise" else "value"] = value
        return self.log_store.execute([parse_operation(d, self.namespace)])[0]

    def accept(self, key: str, value: str, **evidence: Any) -> Receipt:
        """Commit ``value`` as the current value (the old head is superseded, not lost)."""
        return self._one("accept", key, value, **evidence)

    def contest(self, key: str, value: str, **evidence: Any) -> Receipt:
        """Hold ``value`` open as an alternative to the head."""
        return self._one("contest", key, value, **evidence)

    def reject(self, key: str, value: str | None = None, **evidence: Any) -> Receipt:
        """Record the head as wrong: replace it with ``value``, or roll it back when no value is given."""
        return self._one("reject", key, value, **evidence)

    def revoke(self, key: str, value: str | None = None, **evidence: Any) -> Receipt:
        """Retract the head (roll back) or an open alternative."""
        return self._one("revoke", key, value, **evidence)

    def resolve(self, key: str, value: str, **evidence: Any) -> Receipt:
        """Settle a contested cell in favour of ``value``."""
        return self._one("resolve", key, value, **evidence)

    def support(self, key: str, value: str | None = None, **evidence: Any) -> Receipt:
        """Add evidence to the head (or to an open alternative)."""
        return self._one("support", key, value, **evidence)

    def revise(self, key: str, new_value: str, *, old_value: str | None = None, status: str = "update",
               hard_commit: bool = False, **evidence: Any) -> Receipt:
        """The patch interface of SPEC §5, classified against the head."""
        return self._one("revise", key, new_value, old_value=old_value, status=status,
                         hard_commit=hard_commit or None, **evidence)

    # -- reading -------------------------------------------------------------
    def get(self, key: str, *, as_of: int | None = None, disclose: Iterable[str] = (),
            namespace: str | None = None) -> CellView:
        """The cell now (or as of event index ``as_of``); an unknown cell reads as ``empty``."""
        ns, k = namespace or self.namespace, normalize_key(key)
        modes = _disclosures(disclose)
        t = self.reader.timeline(cell_id(ns, k), as_of)
        return empty_view(ns, k) if t is None else t.view(modes)

    def get_many(self, keys: Iterable[str], *, namespace: str | None = None) -> dict[str, CellView]:
        """The current view of each key (normalised key -> view, empty cells included), in one read."""
        ns = namespace or self.namespace
        wanted = {normalize_key(k) for k in keys}
        ids = {cell_id(ns, k): k for k in wanted}
        found = fold(e for events in self.log_store.cell_events(list(ids)).values() for e in events)
        return {k: found[cid].view() if cid in found else empty_view(ns, k) for cid, k in ids.items()}

    def frontier(self, *, as_of: int | None = None, disclose: Iterable[str] = (),
                 namespace: str | None = None) -> list[CellView]:
        """Every non-empty cell of the namespace, by key."""
        modes = _disclosures(disclose)
        return [t.view(modes) for t in self.reader.frontier(namespace or self.namespace, as_of)]

    def history(self, key: str, *, as_of: int | None = None, namespace: str | None = None) -> History:
        """Every version the cell has held or been offered, with status and open intervals."""
        ns, k = namespace or self.namespace, normalize_key(key)
        t = self.reader.timeline(cell_id(ns, k), as_of)
        return History(ns, k, ()) if t is None else t.history()

    def log(self, *, after: int = 0, limit: int | None = None, namespace: str | None = None,
            as_of: int | None = None) -> list[dict[str, Any]]:
        """Events after index ``after`` (at most ``limit``), as plain dicts."""
        ns = namespace or self.namespace
        out: list[dict[str, Any]] = []
        for index, e in self.log_store.indexed_events(after + 1, as_of):
            if e.namespace != ns:
                continue
            out.append(event_dict(index, e))
            if limit is not None and len(out) >= limit:
                break
        return out

    def last_index(self) -> int:
        """The index of the newest event in the whole log (0 when empty)."""
        return self.log_store.last_index()


def event_dict(index: int, e: Any) -> dict[str, Any]:
    d = {"event_index": index, "key": e.key, "op": e.OP, "value": getattr(e, "value", None),
         "applied": e.applied}
    for name, v in vars(e).items():
        if name in ("originator_id", "originator_version", "timestamp", "value") or v is None:
            continue
        d[name] = v
    d["recorded_at"] = e.timestamp.isoformat()
    return d


def _disclosures(disclose: Iterable[str]) -> frozenset[str]:
    modes = frozenset(m.strip() for m in disclose if m.strip())
    bad = sorted(modes - DISCLOSURES)
    if bad:
        raise InvalidOperation(f"unknown disclosure {bad[0]!r} (expected history, alternatives or support)",
                               field="disclose")
    return modes


def open_store(path: str | Path = "pmem.db", *, namespace: str = DEFAULT_NAMESPACE,
               synchronous: str | None = None) -> Store:
    """Open (creating if needed) the store at ``path``."""
    return Store(path, namespace=namespace, synchronous=synchronous)


__all__ = ["DEFAULT_TRUST", "Evidence", "Operation", "Store", "open_store"]
