"""The admin use cases: catch the projections up, rebuild them from the log, report counts and lag.

``stats`` counts what the log holds (events, and from the compact cell state, cells and namespaces)
without catching anything up; each projection's position, lag (and the frontier's versions) apart."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pmem.adapters.readmodels import screening
from pmem.adapters.readmodels.registry import (
    FRONTIER,
    GRAPH,
    LEXICAL,
    PROJECTION_NAMES,
    VECTORS,
    projection_problem,
    selected,
)
from pmem.adapters.readmodels.sqlite_projection import timed
from pmem.adapters.readmodels.tracked_projection import rebuild_together, tracked_position
from pmem.adapters.service.bootstrap import Wiring
from pmem.domain.errors import InvalidOperation

REPLAYED_TOGETHER = (GRAPH, LEXICAL)  # rebuilt in one pass over the log; the frontier and vectors have their own


class Admin:
    """Projection upkeep for one store (every namespace)."""

    def __init__(self, wiring: Wiring) -> None:
        self.w = wiring

    def catch_up(self) -> dict[str, int]:
        with self.w.lock:
            return {name: p.catch_up(progress=self.w.progress) for name, p in self.w.projections.items()}

    def rebuild(self, projection: str = "all") -> dict[str, Any]:
        problem = projection_problem(projection) if isinstance(projection, str) else (
            f"projection must be a name, got {type(projection).__name__}")
        if problem:
            raise InvalidOperation(problem, field="projection")
        events, seconds = timed(lambda: self.rebuild_selected(selected(projection)))
        return {"events": events, "seconds": seconds}

    def rebuild_selected(self, names: Sequence[str]) -> int:
        """Rebuild these projections, in their order: the frontier (its parallel fold) and the vectors
        each by their own path, graph and full-text together in one pass over the log
        (:func:`~pmem.adapters.readmodels.tracked_projection.rebuild_together`: each event is read and
        decoded once for both). Returns the events replayed (the most of any)."""
        together = [self.w.projections[n] for n in names if n in REPLAYED_TOGETHER]
        counts = []
        with self.w.lock:
            for name in names:
                if name not in REPLAYED_TOGETHER:
                    counts.append(self._rebuild_one(name))
                elif together:
                    counts.append(rebuild_together(together, progress=self.w.progress))
                    together = []
        return max(counts)

    def rebuild_vectors(self) -> int:
        return self.w.vector_search().rebuild()

    def _rebuild_one(self, name: str) -> int:
        if name == VECTORS:
            return self.rebuild_vectors()
        return int(self.w.projections[name].rebuild(progress=self.w.progress))

    def stats(self) -> dict[str, Any]:
        from pmem.adapters.readmodels.heartbeat import workers

        last = self.w.events.last_index()
        cells, namespaces = self.w.events.state_counts()  # the log's side: no projection waited on
        conn = self.w.projection_db
        with self.w.lock:
            projections = {name: _position_and_lag(tracked_position(conn, name), last) for name in PROJECTION_NAMES}
            projections[FRONTIER]["versions"] = conn.execute("SELECT count(*) FROM versions").fetchone()[0]
            for name in PROJECTION_NAMES:
                found = screening.stops(conn, name)
                if found:  # an event it cannot apply stopped it in these namespaces (readmodels.screening)
                    projections[name]["stopped"] = [s.as_dict() for _, s in sorted(found.items())]
            for name, worker in workers(conn).items():
                if name in projections:
                    projections[name]["worker"] = worker
            return {
                "events": last,
                "cells": cells,
                "namespaces": namespaces,
                "projections": projections,
                "key_edition": self.w.key_edition,
            }


def _position_and_lag(position: int, last: int) -> dict[str, Any]:
    return {"position": position, "lag": max(last - position, 0)}
