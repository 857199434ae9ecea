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
from pmem.domain.keys import cell_id, normalize_key
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
        ns, k = namespace or self.w.namespace, normalize_key(key)
        modes = disclosures(disclose)
        t = self.timeline(cell_id(ns, k), as_of)
        return empty_view(ns, k) if t is None else t.view(modes)

    def get_many(self, keys: Iterable[str], *, namespace: str | None = None) -> dict[str, CellView]:
        ns = namespace or self.w.namespace
        wanted = {normalize_key(k) for k in keys}
        ids = {cell_id(ns, k): k for k in wanted}
        found = fold(e for events in self.w.log.get().cell_events(list(ids)).values() for e in events)
        return {k: found[cid].view() if cid in found else empty_view(ns, k) for cid, k in ids.items()}

    def frontier(self, *, as_of: int | None = None, disclose: Iterable[str] = (),
                 namespace: str | None = None) -> list[CellView]:
        modes = disclosures(disclose)
        with self.w.lock:
            self.catch_up_frontier()
            cells = self.w.reader.frontier(namespace or self.w.namespace, as_of, with_versions=bool(modes))
        return [t.view(modes) for t in cells]

    def history(self, key: str, *, as_of: int | None = None, namespace: str | None = None) -> History:
        ns, k = namespace or self.w.namespace, normalize_key(key)
        t = self.timeline(cell_id(ns, k), as_of)
        return History(ns, k, ()) if t is None else t.history()

    def log(self, *, after: int = 0, limit: int | None = None, namespace: str | None = None,
            as_of: int | None = None) -> list[dict[str, Any]]:
        ns = namespace or self.w.namespace
        out: list[dict[str, Any]] = []
        start = after + 1
        while True:
            rows = self.w.events.rows(start, as_of, LOG_PAGE)
            for row in rows:
                d = event_dict(row)
                if d["namespace"] == ns:
                    out.append(d)
                    if limit is not None and len(out) >= limit:
                        return out
            if len(rows) < LOG_PAGE:
                return out
            start = rows[-1][0] + 1

    def last_index(self) -> int:
        return int(self.w.events.last_index())

    def timeline(self, cid: UUID, as_of: int | None) -> Timeline | ProjectedCell | None:
        """One cell's timeline as of ``as_of`` (None when it has no events by then)."""
        with self.w.lock:
            self.catch_up_frontier()
            return self.w.reader.timeline(cid, as_of)

    def catch_up_frontier(self) -> None:
        if isinstance(self.w.reader, ProjectionReader):
            self.w.projections["frontier"].catch_up(progress=self.w.progress)


def disclosures(disclose: Iterable[str]) -> frozenset[str]:
    """The disclosure modes asked for (``history``, ``alternatives``, ``support``); others are refused."""
    modes = frozenset(m.strip() for m in disclose if m.strip())
    bad = sorted(modes - DISCLOSURES)
    if bad:
        raise InvalidOperation(f"unknown disclosure {bad[0]!r} (expected history, alternatives or support)",
                               field="disclose")
    return modes
