"""The graph projection (``graph_facts``), next to the log and the frontier tables (SQLite or PostgreSQL).

Same pattern as :mod:`pmem.adapters.readmodels.sqlite_projection`: each batch of events is applied in one
transaction that also moves this projection's row in ``pmem_tracking``, so rows and position never
disagree; :meth:`GraphProjection.rebuild` drops the table and replays the log from index 1. A cell
first met in a batch is seeded by folding its earlier events from the log. Reads
(:meth:`GraphProjection.graph`) take the rows open at ``as_of`` and build the entity graph;
:meth:`GraphProjection.graph_around` takes only the rows at a few entities (by the indexed ``subject`` and
``obj`` columns), for a neighbourhood that must not cost the whole graph.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Sequence
from typing import Any
from uuid import UUID

from pmem.adapters.readmodels.tracked_projection import TRACKING, TrackedProjection
from pmem.adapters.storage.projection_db import ProjectionDb, SqliteDb
from pmem.domain.state import FORGOTTEN_TEXT
from pmem.projections.graph import (
    COLUMNS,
    DECLARED_PREFIX,
    NAME,
    PK,
    SCHEMA_VERSION,
    EntityGraph,
    Fact,
    GraphProjector,
    Row,
    build_graph,
    entity_slug,
    fact_of,
    split_key,
    without_system,
)
from pmem.projections.replay import IndexedEvent, fold

TABLE = "graph_facts"
BATCH_SIZE = 2_000
FACT = "key, value, status, trust, opened_at, node_type"  # a row as build_graph takes it
CHUNK = 500  # entities per IN (...) list: under SQLite's and psycopg's parameter limits


class GraphProjection(TrackedProjection):
    """Maintains ``graph_facts`` from the log (``log``: an :class:`pmem.adapters.eventstore.eventlog.EventLog`)."""

    name = NAME
    version = SCHEMA_VERSION

    def __init__(self, conn: ProjectionDb | sqlite3.Connection, log: Any, *, batch_size: int = BATCH_SIZE) -> None:
        super().__init__(conn, log, GraphProjector(), batch_size=batch_size)

    def create_tables(self) -> None:
        if self._has_table() and not self._stale():
            self._key_index()
            return
        with self._transaction():
            if self._has_table() and self._stale():
                self._drop()
            self._create()

    def _stale(self) -> bool:
        """The table was written by another schema version (or, before the version was tracked, has
        other columns): it is dropped and rebuilt from the log."""
        if self.stored_version() not in (None, self.version):
            return True
        described = self.conn.execute(f"SELECT * FROM {TABLE} LIMIT 0").description
        return [d[0] for d in described] != list(COLUMNS)

    def _has_table(self) -> bool:
        return {TABLE, TRACKING} <= self.conn.names()

    def _create(self) -> None:
        self._create_tracking()
        self.conn.ensure_table(TABLE, COLUMNS, PK, nullable=set(COLUMNS) - set(PK))
        self.conn.execute(f"CREATE INDEX IF NOT EXISTS graph_facts_open ON {TABLE}(cell_id) "
                          "WHERE closed_at IS NULL")
        self.conn.execute(f"CREATE INDEX IF NOT EXISTS graph_facts_ns ON {TABLE}(namespace, opened_at)")
        self.conn.execute(f"CREATE INDEX IF NOT EXISTS graph_facts_subject ON {TABLE}(namespace, subject)")
        self.conn.execute(f"CREATE INDEX IF NOT EXISTS graph_facts_obj ON {TABLE}(namespace, obj)")
        self._key_index()

    @property
    def _binary(self) -> str:
        """Key ranges compare bytes: SQLite's default; PostgreSQL's ``C`` collation, whatever the database's."""
        return "" if isinstance(self.conn, SqliteDb) else ' COLLATE "C"'

    def _key_index(self) -> None:
        """The index a subject's facts are read by (:meth:`facts_of`). Added to a store made before it
        at first open; a store that cannot be written reads without it (a scan, the same rows)."""
        try:
            self.conn.execute(f"CREATE INDEX IF NOT EXISTS graph_facts_key ON {TABLE}(namespace, key{self._binary})")
        except self.conn.errors:
            pass

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
        """The rows of a forgotten cell's past heads keep their periods; their values (and the values'
        entities) are forgotten."""
        self.conn.executemany(f"UPDATE {TABLE} SET value=?, obj=NULL WHERE cell_id=?",
                              [(FORGOTTEN_TEXT, c) for c in cells])

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
            f"SELECT {FACT} FROM {TABLE} WHERE namespace=? AND opened_at<=? "
            "AND (closed_at IS NULL OR closed_at>?) ORDER BY opened_at, key", (namespace, n, n))
        return build_graph(rows)

    def facts_of(self, namespace: str, subject: str, as_of: int | None = None) -> list[Fact]:
        """The open facts (as of ``as_of``) of one subject: its keys ``<subject>.<relation>``, read by
        the key index, without building the graph (``pmem read --hops``). One key range, ``subject`` up
        to ``subject/`` (``/`` follows ``.``), holds the key ``subject`` and every ``subject.*``."""
        n = self.position() if as_of is None else as_of
        lo = f"{subject}."
        rows = self.conn.execute(
            f"SELECT key, value, status, trust, opened_at, node_type FROM {TABLE} WHERE namespace=? "
            f"AND key{self._binary} >= ? AND key{self._binary} < ? AND opened_at<=? "
            "AND (closed_at IS NULL OR closed_at>?) ORDER BY key", (namespace, subject, f"{subject}/", n, n))
        return [fact_of(*r) for r in rows if (r[0].startswith(lo) or r[0] == subject) and r[1] != FORGOTTEN_TEXT
                and not r[0].startswith(DECLARED_PREFIX)]

    def graph_around(self, namespace: str, entities: Collection[str], as_of: int | None = None) -> EntityGraph:
        """The part of :meth:`graph` at ``entities``: their facts, the facts whose value is one of them, the
        facts sharing a value with theirs (their association edges) and the declared prerequisites.
        Exact for ``entities`` (text, type, facts, every edge at them); other entities in it are partial.
        Reads only those rows (indexed), so its cost grows with the neighbourhood, not the store."""
        n = self.position() if as_of is None else as_of
        wanted = set(entities)
        about = self._rows_at(namespace, n, "subject", wanted) | self._rows_at(namespace, n, "obj", wanted)
        shared = {entity_slug(r[1]) for r in about if split_key(r[0])[0] in wanted} - wanted
        rows = about | self._rows_at(namespace, n, "obj", shared)
        rows |= self._rows_at(namespace, n, "subject", {split_key(DECLARED_PREFIX)[0]})
        return without_system(build_graph(sorted(rows, key=lambda r: (r[4], r[0]))))

    def _rows_at(self, namespace: str, n: int, column: str, slugs: set[str]) -> set[Row]:
        """The rows open at ``n`` whose ``column`` (``subject`` or ``obj``) is one of ``slugs``."""
        out: set[Row] = set()
        ordered = sorted(slugs)
        for i in range(0, len(ordered), CHUNK):
            part = ordered[i:i + CHUNK]
            out.update(tuple(r) for r in self.conn.execute(
                f"SELECT {FACT} FROM {TABLE} WHERE namespace=? AND {column} IN ({', '.join('?' * len(part))}) "
                "AND opened_at<=? AND (closed_at IS NULL OR closed_at>?)", (namespace, *part, n, n)))
        return out
