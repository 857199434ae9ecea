"""The graph projection (``graph_facts``), next to the log and the frontier tables (SQLite or PostgreSQL).

Same pattern as :mod:`pmem.adapters.readmodels.sqlite_projection`: each batch of events is applied in one
transaction that also moves this projection's row in ``pmem_tracking``, so rows and position never
disagree; :meth:`GraphProjection.rebuild` drops the table and replays the log from index 1. A cell
first met in a batch is seeded by folding its earlier events from the log. Reads
(:meth:`GraphProjection.graph`) take the rows open at ``as_of`` and build the entity graph;
:meth:`GraphProjection.graph_around` takes only the rows at a few entities (by the indexed ``subject`` and
``obj`` columns), for a neighbourhood that must not cost the whole graph.

The scores ``pmem next`` ranks by are kept here too (``graph_scores``, one row per entity; docs/graph.md):
a batch marks the namespaces whose rows it changed dirty (``graph_dirty``, in the batch's transaction),
and :meth:`GraphProjection.store_scores` stores a dirty namespace's PageRank, communities and
candidate scores computed from :meth:`GraphProjection.graph_to_score` (the graph and the stored rows it
starts from; by the score worker, which lets go of the store's lock meanwhile), writing only the rows that
changed, with the position they hold for (``graph_scored``), unless the namespace changed again after that
position. :meth:`GraphProjection.next_rows` then reads the top k by an index on the score.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection, Sequence
from typing import Any
from uuid import UUID

from pmem.adapters.readmodels.tracked_projection import TRACKING, TrackedProjection
from pmem.adapters.storage.projection_db import ProjectionDb, SqliteDb
from pmem.domain.state import FORGOTTEN_TEXT
from pmem.projections.graph import (
    CLOSED,
    COLUMNS,
    DECLARED_PREFIX,
    NAME,
    OPENED,
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
SCORES, SCORED, DIRTY = "graph_scores", "graph_scored", "graph_dirty"
SCORE_COLUMNS = ("namespace", "entity", "importance", "pagerank", "community", "base", "text", "kind", "gap",
                 "requires")
Seed = dict[str, tuple[float, int]]  # entity -> its stored PageRank and community
Scorer = Callable[[EntityGraph, Seed], tuple[dict[str, tuple[Any, ...]], float]]  # -> rows after (namespace, entity)
CANDIDATE = "entity, importance, pagerank, community, text, kind, gap, requires"  # a row as ranked() takes it


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
        self._create_scores()

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

    def _create_scores(self) -> None:
        real, i = "DOUBLE PRECISION", self.conn.int_type
        self.conn.execute(f"CREATE TABLE IF NOT EXISTS {SCORES} (namespace TEXT NOT NULL, entity TEXT NOT NULL, "
                          f"importance {real} NOT NULL, pagerank {real} NOT NULL, community {i} NOT NULL, "
                          f"base {real}, text TEXT NOT NULL, kind TEXT NOT NULL, gap TEXT NOT NULL, "
                          "requires TEXT NOT NULL, PRIMARY KEY (namespace, entity))")
        # The top k of a namespace, and of one community (the previous pick's bonus), read in score order.
        self.conn.execute(f"CREATE INDEX IF NOT EXISTS graph_scores_top ON {SCORES}(namespace, base DESC, entity) "
                          "WHERE base IS NOT NULL")
        self.conn.execute(f"CREATE INDEX IF NOT EXISTS graph_scores_community ON {SCORES}"
                          "(namespace, community, base DESC, entity) WHERE base IS NOT NULL")
        self.conn.execute(f"CREATE TABLE IF NOT EXISTS {SCORED} (namespace TEXT PRIMARY KEY, "
                          f"position {i} NOT NULL, max_importance {real} NOT NULL)")
        self.conn.execute(f"CREATE TABLE IF NOT EXISTS {DIRTY} (namespace TEXT PRIMARY KEY, "
                          f"changed_at {i} NOT NULL)")

    def _drop(self) -> None:
        self._forget_position()
        for t in (TABLE, SCORES, SCORED, DIRTY):
            self.conn.execute(f"DROP TABLE IF EXISTS {t}")

    # -- catching up -------------------------------------------------------------
    def _seed_batch(self, events: Sequence[IndexedEvent], start: int) -> None:
        if self._whole and not self.projector.evicted:
            return  # a rebuild's projector holds every cell met so far: the others are new
        self._seed({e.originator_id for _, e in events} - {UUID(c) for c in self.projector.cells}, start)

    def _write_rows(self, rows: Any) -> None:
        """The rows, and their namespaces marked dirty (a forgotten cell's head closes: a row here too)."""
        rows = list(rows)
        self.conn.executemany(self.conn.upsert(TABLE, list(COLUMNS), PK), rows)
        changed: dict[str, int] = {}
        for r in rows:
            changed[r[1]] = max(changed.get(r[1], 0), r[OPENED], r[CLOSED] or 0)
        self._mark_dirty(changed)

    def _mark_dirty(self, changed: dict[str, int]) -> None:
        """Each namespace dirty since its latest change (a resumed namespace's older events never lower it)."""
        self.conn.executemany(
            f"INSERT INTO {DIRTY} (namespace, changed_at) VALUES (?, ?) ON CONFLICT (namespace) DO UPDATE SET "
            f"changed_at = CASE WHEN excluded.changed_at > {DIRTY}.changed_at THEN excluded.changed_at "
            f"ELSE {DIRTY}.changed_at END", sorted(changed.items()))

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
        return build_graph(self._open_rows(namespace, self.position() if as_of is None else as_of))

    def _open_rows(self, namespace: str, n: int) -> list[Row]:
        """The namespace's fact rows open at event index ``n``, as :func:`build_graph` takes them."""
        return [tuple(r) for r in self.conn.execute(
            f"SELECT {FACT} FROM {TABLE} WHERE namespace=? AND opened_at<=? "
            "AND (closed_at IS NULL OR closed_at>?) ORDER BY opened_at, key", (namespace, n, n))]

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

    # -- the stored scores of ``next`` ----------------------------------------------
    def refresh_scores(self, score: Scorer) -> list[str]:
        """Score every dirty namespace at the current position with ``score`` (the graph and the stored
        seed -> entity -> the values of its row after ``namespace, entity``, and the maximum importance:
        :func:`pmem.adapters.graph.scores.stored_values`); return those namespaces."""
        done = []
        for ns in self.dirty():
            position, g, seed = self.graph_to_score(ns)
            if self.store_scores(ns, position, *score(g, seed)):
                done.append(ns)
        return done

    def dirty(self) -> list[str]:
        """The namespaces whose facts changed since their scores were stored."""
        return [r[0] for r in self.conn.execute(f"SELECT namespace FROM {DIRTY} ORDER BY namespace").fetchall()]

    def graph_to_score(self, namespace: str) -> tuple[int, EntityGraph, Seed]:
        """The position and the graph (without P-Mem's cells) a namespace's scores are computed from, and
        the stored PageRank and community of each entity (what a re-scoring starts from)."""
        position, rows, seed = self.rows_to_score(namespace)
        return position, without_system(build_graph(rows)), seed

    def rows_to_score(self, namespace: str) -> tuple[int, list[Row], Seed]:
        """What :meth:`graph_to_score` reads, without building the graph: a caller that holds a lock for
        the connection builds it after letting go."""
        position = self.position()
        seed = {r[0]: (float(r[1]), int(r[2])) for r in self.conn.execute(
            f"SELECT entity, pagerank, community FROM {SCORES} WHERE namespace=?", (namespace,))}
        return position, self._open_rows(namespace, position), seed

    def store_scores(self, namespace: str, position: int, values: dict[str, tuple[Any, ...]], top: float) -> bool:
        """Store scores computed from the graph at ``position``, in one transaction that writes only the rows
        that changed; False (nothing written) when the namespace changed after ``position`` meanwhile."""
        with self._transaction():
            row = self.conn.execute(f"SELECT changed_at FROM {DIRTY} WHERE namespace=?", (namespace,)).fetchone()
            if row is not None and int(row[0]) > position:
                return False
            self._store_scores(namespace, {v: (namespace, v, *r) for v, r in values.items()})
            self.conn.execute(self.conn.upsert(SCORED, ["namespace", "position", "max_importance"], ["namespace"]),
                              (namespace, position, top))
            self.conn.execute(f"DELETE FROM {DIRTY} WHERE namespace=?", (namespace,))
        return True

    def _store_scores(self, namespace: str, rows: dict[str, tuple[Any, ...]]) -> None:
        old = {r[1]: tuple(r) for r in self.conn.execute(
            f"SELECT {', '.join(SCORE_COLUMNS)} FROM {SCORES} WHERE namespace=?", (namespace,))}
        gone = [(namespace, v) for v in old.keys() - rows.keys()]
        self.conn.executemany(f"DELETE FROM {SCORES} WHERE namespace=? AND entity=?", gone)
        changed = [r for v, r in rows.items() if old.get(v) != r]
        self.conn.executemany(self.conn.upsert(SCORES, list(SCORE_COLUMNS), ["namespace", "entity"]), changed)

    def scored(self, namespace: str) -> tuple[int, float, bool]:
        """``(position, maximum importance, current)`` of the namespace's stored scores. Current: they hold
        at this projection's position (its facts have not changed since); else ``position`` is where they
        were computed (0 before any scoring)."""
        row = self.conn.execute(f"SELECT position, max_importance FROM {SCORED} WHERE namespace=?",
                                (namespace,)).fetchone()
        top = 0.0 if row is None else float(row[1])
        if self.conn.execute(f"SELECT 1 FROM {DIRTY} WHERE namespace=?", (namespace,)).fetchone():
            return (0 if row is None else int(row[0])), top, False
        return self.position(), top, True

    def next_rows(self, namespace: str, k: int, previous: str | None) -> list[tuple[Any, ...]]:
        """The ``k`` best stored candidates, and the ``k`` best of the previous pick's community (those
        earn the continuity bonus): at most 2k rows, each read by an index in score order."""
        out = self.conn.execute(f"SELECT {CANDIDATE} FROM {SCORES} WHERE namespace=? AND base IS NOT NULL "
                                "ORDER BY base DESC, entity LIMIT ?", (namespace, k)).fetchall()
        community = self.community_of(namespace, previous)
        if community is not None:
            out += self.conn.execute(f"SELECT {CANDIDATE} FROM {SCORES} WHERE namespace=? AND community=? "
                                     "AND base IS NOT NULL ORDER BY base DESC, entity LIMIT ?",
                                     (namespace, community, k)).fetchall()
        return [tuple(r) for r in out]

    def community_of(self, namespace: str, entity: str | None) -> int | None:
        if entity is None:
            return None
        row = self.conn.execute(f"SELECT community FROM {SCORES} WHERE namespace=? AND entity=?",
                                (namespace, entity)).fetchone()
        return None if row is None else int(row[0])

    def stored_scores(self, namespace: str) -> dict[str, tuple[float | None, int, float]]:
        """Entity -> (score without bonus or None, community, PageRank): what the equality test compares."""
        return {r[0]: (None if r[1] is None else float(r[1]), int(r[2]), float(r[3])) for r in self.conn.execute(
            f"SELECT entity, base, community, pagerank FROM {SCORES} WHERE namespace=?", (namespace,))}
