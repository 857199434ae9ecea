"""The graph projection (``graph_facts``), next to the log and the frontier tables (SQLite or PostgreSQL).

Same pattern as :mod:`pmem.adapters.readmodels.sqlite_projection`: each batch of events is applied in one
transaction that also moves this projection's row in ``pmem_tracking``, so rows and position never
disagree; :meth:`GraphProjection.rebuild` drops the table and replays the log from index 1. A cell
first met in a batch is seeded by folding its earlier events from the log. Reads
(:meth:`GraphProjection.graph`) take the rows open at ``as_of`` and build the entity graph.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from pmem.adapters.readmodels.tracked_projection import TRACKING, TrackedProjection
from pmem.adapters.storage.projection_db import ProjectionDb
from pmem.domain.state import FORGOTTEN_TEXT
from pmem.projections.graph import COLUMNS, NAME, PK, SCHEMA_VERSION, EntityGraph, GraphProjector, build_graph
from pmem.projections.replay import IndexedEvent, fold

TABLE = "graph_facts"
BATCH_SIZE = 2_000


class GraphProjection(TrackedProjection):
    """Maintains ``graph_facts`` from the log (``log``: an :class:`pmem.adapters.eventstore.eventlog.EventLog`)."""

    name = NAME
    version = SCHEMA_VERSION

    def __init__(self, conn: ProjectionDb | sqlite3.Connection, log: Any, *, batch_size: int = BATCH_SIZE) -> None:
        super().__init__(conn, log, GraphProjector(), batch_size=batch_size)

    def create_tables(self) -> None:
        if self._has_table() and self.stored_version() in (None, self.version):
            return
        with self._transaction():
            if self._has_table() and self.stored_version() not in (None, self.version):
                self._drop()
            self._create()

    def _has_table(self) -> bool:
        return {TABLE, TRACKING} <= self.conn.names()

    def _create(self) -> None:
        self._create_tracking()
        self.conn.ensure_table(TABLE, COLUMNS, PK, nullable=set(COLUMNS) - set(PK))
        self.conn.execute(f"CREATE INDEX IF NOT EXISTS graph_facts_open ON {TABLE}(cell_id) "
                          "WHERE closed_at IS NULL")
        self.conn.execute(f"CREATE INDEX IF NOT EXISTS graph_facts_ns ON {TABLE}(namespace, opened_at)")

    def _drop(self) -> None:
        self._forget_position()
        self.conn.execute(f"DROP TABLE IF EXISTS {TABLE}")

    # -- catching up -------------------------------------------------------------
    def _seed_batch(self, events: Sequence[IndexedEvent], start: int) -> None:
        if self._whole and not self.projector.evicted:
            return  # a rebuild's projector holds every cell met so far: the others are new
        self._seed({e.originator_id for _, e in events} - {UUID(c) for c in self.projector.cells}, start)

    def _write_rows(self, rows: Any) -> None:
        self.conn.executemany(self.conn.upsert(TABLE, list(COLUMNS), PK), rows)

    def _forget_cells(self, cells: list[str]) -> None:
        """The rows of a forgotten cell's past heads keep their periods; their values are forgotten."""
        self.conn.executemany(f"UPDATE {TABLE} SET value=? WHERE cell_id=?", [(FORGOTTEN_TEXT, c) for c in cells])

    def _seed(self, ids: set[UUID], upto: int) -> None:
        """Fold the earlier events of cells not in memory (a new cell has none) and load its open row."""
        if not ids or upto == 0:
            return
        timelines = fold(e for evs in self.log.cell_events(sorted(ids), upto=upto).values() for e in evs)
        for cid, t in timelines.items():
            row = self.conn.execute(f"SELECT * FROM {TABLE} WHERE cell_id=? AND closed_at IS NULL",
                                    (cid.hex,)).fetchone()
            self.projector.seed(cid.hex, t.state, row)

    # -- reading -----------------------------------------------------------------
    def graph(self, namespace: str, as_of: int | None = None) -> EntityGraph:
        """The entity graph of ``namespace`` as of event index ``as_of`` (default: now)."""
        n = self.position() if as_of is None else as_of
        rows = self.conn.execute(
            f"SELECT key, value, status, trust, opened_at, node_type FROM {TABLE} WHERE namespace=? AND opened_at<=? "
            "AND (closed_at IS NULL OR closed_at>?) ORDER BY opened_at, key", (namespace, n, n))
        return build_graph(rows)
