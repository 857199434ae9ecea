"""The read use case: cells, histories, the frontier and the raw log, now or as of an event index.

Reads are served by the frontier projection, caught up to the end of the log first (or by a fold of
the log itself with ``reader="replay"``, the reference the projection is tested against)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from uuid import UUID

from pmem.adapters.eventstore.stored_log import event_dict
from pmem.adapters.readmodels.projection_reader import ProjectionReader
from pmem.adapters.service.bootstrap import Wiring
from pmem.domain.errors import InvalidOperation
from pmem.domain.extraction.key_identity import is_system_key
from pmem.domain.keys import cell_id, normalize_key
from pmem.domain.operations import (
    MAX_FIELD_CHARS,
    MAX_INDEX,
    checked_count,
    checked_namespace,
    checked_string,
    optional_count,
)
from pmem.domain.views import CellView, History
from pmem.projections.frontier_view import ProjectedCell
from pmem.projections.replay import Timeline, empty_view, fold

LOG_PAGE = 5_000  # rows per read of ``log``
DISCLOSURES = frozenset({"history", "alternatives", "support"})


class Reads:
    """What the memory holds, from the projections (caught up first) or a fold of the log."""

    def __init__(self, wiring: Wiring) -> None:
        self.w = wiring

    def get(self, key: str, *, as_of: int | None = None, disclose: Iterable[str] = (),
            namespace: str | None = None) -> CellView:
        ns, k, as_of = self.namespace(namespace), self.key(key), checked_as_of(as_of)
        modes = disclosures(disclose)
        t = self.timeline(cell_id(ns, k), as_of)
        return empty_view(ns, k) if t is None else t.view(modes)

    def get_many(self, keys: Iterable[str], *, namespace: str | None = None) -> dict[str, CellView]:
        ns = self.namespace(namespace)
        if isinstance(keys, (str, bytes, bytearray)) or not isinstance(keys, Iterable):
            raise InvalidOperation(f"keys must be a list of keys, got {type(keys).__name__}", field="keys")
        wanted = {self.key(k) for k in keys}
        ids = {cell_id(ns, k): k for k in wanted}
        found = fold(e for events in self.w.log.get().cell_events(list(ids)).values() for e in events)
        return {k: found[cid].view() if cid in found else empty_view(ns, k) for cid, k in ids.items()}

    def frontier(self, *, as_of: int | None = None, disclose: Iterable[str] = (),
                 namespace: str | None = None, system: bool = False) -> list[CellView]:
        ns, as_of, modes = self.namespace(namespace), checked_as_of(as_of), disclosures(disclose)
        system = checked_flag(system, "system")
        with self.w.lock:
            self.catch_up_frontier()
            cells = self.w.reader.frontier(ns, as_of, with_versions=bool(modes))
        views = (t.view(modes) for t in cells)
        return list(views) if system else [v for v in views if not is_system_key(v.key)]

    def history(self, key: str, *, as_of: int | None = None, namespace: str | None = None) -> History:
        ns, k, as_of = self.namespace(namespace), self.key(key), checked_as_of(as_of)
        t = self.timeline(cell_id(ns, k), as_of)
        return History(ns, k, ()) if t is None else t.history()

    def log(self, *, after: int = 0, limit: int | None = None, namespace: str | None = None,
            as_of: int | None = None) -> list[dict[str, Any]]:
        ns, as_of = self.namespace(namespace), checked_as_of(as_of)
        after = checked_count(after, "after", "a non-negative event index")
        limit = optional_count(limit, "limit", "a non-negative number of events")
        out: list[dict[str, Any]] = []
        if limit == 0 or after >= MAX_INDEX:
            return out
        start = after + 1
        while True:
            rows = self.w.events.rows(start, as_of, LOG_PAGE)
            self.w.events.keys.refresh(r[1] for r in rows)
            for row in rows:
                d = event_dict(row, self.w.events.keys)
                if d["namespace"] == ns:
                    out.append(d)
                    if limit is not None and len(out) >= limit:
                        return out
            if len(rows) < LOG_PAGE:
                return out
            start = rows[-1][0] + 1

    def last_index(self) -> int:
        return int(self.w.events.last_index())

    def key(self, key: object) -> str:
        """The cell key a read names, by the store's key edition."""
        return normalize_key(checked_key(key), self.w.key_edition)

    def namespace(self, namespace: object) -> str:
        """The namespace a read names: the store's when None, else a valid namespace (never ``""``)."""
        return self.w.namespace if namespace is None else checked_namespace(namespace)

    def timeline(self, cid: UUID, as_of: int | None) -> Timeline | ProjectedCell | None:
        """One cell's timeline as of ``as_of`` (None when it has no events by then)."""
        with self.w.lock:
            self.catch_up_frontier()
            return self.w.reader.timeline(cid, as_of)

    def catch_up_frontier(self) -> None:
        if isinstance(self.w.reader, ProjectionReader):
            self.w.projections["frontier"].catch_up(progress=self.w.progress)


def checked_key(key: object) -> str:
    """``key`` if it is a string a key can be read by (1 to 1,024 bytes of UTF-8), else :class:`InvalidOperation`."""
    return checked_string(key, "key", MAX_FIELD_CHARS, blank=True)


def checked_flag(flag: object, name: str) -> bool:
    """``flag`` if it is true or false (``system``: list P-Mem's own cells too), else :class:`InvalidOperation`."""
    if not isinstance(flag, bool):
        raise InvalidOperation(f"{name} must be true or false, got {type(flag).__name__}", field=name)
    return flag


def checked_as_of(as_of: object) -> int | None:
    """``as_of`` if it is None or an event index (an integer from 0 to 2**63-1), else :class:`InvalidOperation`."""
    return optional_count(as_of, "as_of", "a non-negative event index")


def disclosures(disclose: Iterable[str]) -> frozenset[str]:
    """The disclosure modes asked for (``history``, ``alternatives``, ``support``); others are refused."""
    if isinstance(disclose, (bytes, bytearray)) or not isinstance(disclose, Iterable):
        raise InvalidOperation(f"disclose must be a list of disclosures, got {type(disclose).__name__}",
                               field="disclose")
    listed = list(disclose)
    odd = next((m for m in listed if not isinstance(m, str)), None)
    if odd is not None:
        raise InvalidOperation(f"disclose must list strings, got {type(odd).__name__}", field="disclose")
    modes = frozenset(m.strip() for m in listed if m.strip())
    bad = sorted(modes - DISCLOSURES)
    if bad:
        raise InvalidOperation(f"unknown disclosure {bad[0]!r} (expected history, alternatives or support)",
                               field="disclose")
    return modes
