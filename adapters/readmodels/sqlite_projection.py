"""The frontier-and-history projection, stored next to the log (the same SQLite file, or the same
PostgreSQL schema: the SQL is shared, see :mod:`pmem.adapters.storage.projection_db`).

:class:`FrontierProjection` polls the log (SQLite gives ``eventsourcing`` no push subscription):
each batch of up to ``batch_size`` events (1,000 by default) is applied in one transaction that
also moves the projection's tracking row (``pmem_tracking``: name -> last event index applied).
A crash or an error inside a batch rolls back the rows and the position together, so the next
catch-up resumes exactly where the last committed batch ended: no event is applied twice or
skipped. The batch re-reads the position under the write lock, so two processes catching up the
same file never apply the same batch twice either. :meth:`rebuild` replays the log from index 1
into shadow tables by a faster path (one cell at a time, final rows only) and swaps them in.
Reads go through :class:`pmem.adapters.readmodels.projection_reader.ProjectionReader`.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from pmem.adapters.eventstore.gc_pause import no_gc
from pmem.adapters.eventstore.stored_log import CellRange, RawRow, read_only
from pmem.adapters.progress import Progress, silent
from pmem.adapters.readmodels import screening
from pmem.adapters.readmodels.parallel_rebuild import (
    PIECE_EVENTS,
    cell_ranges,
    checkpointer,
    finish_worker,
    fold_ranges,
    in_cell_order,
    pragmas,
    read_range,
    split,
    start_worker,
    stop_workers,
    write_piece,
)
from pmem.adapters.readmodels.tracked_projection import TRACKING, TrackedProjection
from pmem.adapters.storage.projection_db import ProjectionDb, SqliteDb, create_table
from pmem.domain.errors import ProjectionStopped, StoreUnavailable
from pmem.domain.state import FORGOTTEN_TEXT
from pmem.projections.frontier import NAME, NULLABLE, SCHEMA_VERSION, TABLES, VIEWS, Changes, FrontierProjector, Row
from pmem.projections.replay import IndexedEvent

BATCH_SIZE = 1_000
MIN_PIECE_EVENTS = 5_000  # smallest rebuild piece: smaller ones start writing sooner, but each is a transaction
REBUILD_CHUNK = 50_000  # events per range of cells of a full rebuild: what it holds of the log at most
PARALLEL_FROM = 200_000  # events from which a full rebuild spreads over processes (fewer do not repay starting them)
REBUILD_CACHE_KIB = 2_000  # page cache while a rebuild fills (SQLite's default, a worker's): rows go in key order
REBUILD_BATCH_SIZE = 10_000  # batch size of the incremental path's rebuild (no shadow tables)
SHADOW = "__rebuild"  # how the name of every table a rebuild fills before swapping it in ends
INDEXES = {
    "cells_namespace_key": "CREATE UNIQUE INDEX IF NOT EXISTS cells_namespace_key ON cells(namespace, key)",
}
_CHUNK = 500


class Log(Protocol):
    """What a projection needs from the event log."""

    def indexed_events(self, start: int = 1, stop: int | None = None) -> Iterator[IndexedEvent]: ...

    def last_index(self) -> int: ...

    def rows(self, start: int, stop: int | None, limit: int) -> list[RawRow]: ...

    def rows_of_cells(self, cells: CellRange, stop: int, ranges: int) -> list[RawRow]: ...

    def load_keys(self, cells: CellRange) -> None: ...

    keys: Any  # the keyring sealed fields are opened with (pmem.adapters.eventstore.sealing)


class FrontierProjection(TrackedProjection):
    """Maintains the frontier-and-history tables of :mod:`projections.frontier` from the log."""

    name = NAME
    version = SCHEMA_VERSION
    full_replay_from = 20_000  # events from which a catch-up from index 0 replays like a rebuild

    def __init__(self, conn: ProjectionDb | sqlite3.Connection, log: Log, *, batch_size: int = BATCH_SIZE) -> None:
        super().__init__(conn, log, FrontierProjector(), batch_size=batch_size)
        self.rebuild_chunk = REBUILD_CHUNK  # events per range of cells a full rebuild reads at once
        self.rebuild_piece = PIECE_EVENTS  # at most the events a full rebuild folds per write transaction
        self.rebuild_workers: int | None = None  # processes a full rebuild folds with (None: the cores)
        self.parallel_from = PARALLEL_FROM  # events from which a full rebuild starts worker processes

    # -- schema ------------------------------------------------------------------
    def create_tables(self) -> None:
        """Create the tables, views and indexes that are missing, and drop and recreate them when they
        were written by another schema version (the next catch-up replays them). An older version's
        tables need not all be there: version 2 had no ``edge_events``."""
        if self._has_tables() and self.stored_version() in (None, self.version):
            return
        with self._transaction():  # under the write lock: processes opening a new store at once wait
            if TRACKING in self.conn.names() and self.stored_version() not in (None, self.version):
                self._drop_tables()
            if not self._has_tables():
                self._create_tables()
        self.projector.forget()
        self._cached_at = 0

    def _has_tables(self) -> bool:
        return {TRACKING, *TABLES, *INDEXES} <= self.conn.names() and set(VIEWS) <= self.conn.views()

    def _create_tables(self, suffix: str = "", *, indexes: bool = True) -> None:
        """Create the tables (named ``table + suffix``), and their secondary indexes unless a rebuild
        creates those after filling the tables. On SQLite the tables are ``WITHOUT ROWID``: each is one
        B-tree clustered by its primary key, so a cell's rows sit together and a row is written once.
        (The DDL is written here, not by sqlite-utils: it cannot create ``WITHOUT ROWID`` tables.)
        The views over the tables are created with the unsuffixed ones only."""
        self._create_tracking()
        for table in TABLES:
            self.conn.execute(create_statement(self.conn, table, table + suffix))
        if not suffix:
            self._create_views()
        if indexes:
            self._create_indexes()

    def _create_views(self) -> None:
        """In the order of :data:`VIEWS`: a view after the views it reads."""
        for name, select in VIEWS.items():
            self.conn.execute(self.conn.create_view(name, select))

    def _create_indexes(self) -> None:
        for sql in INDEXES.values():
            self.conn.execute(sql)

    def _drop_tables(self, suffix: str = "") -> None:
        """Drop the rows and the position together (the caller holds the transaction); without a
        suffix, the views first, each before the views it reads (PostgreSQL refuses to drop a table or
        view another view reads), and the tables an older schema version kept under the names the
        views now have."""
        tables = [table + suffix for table in TABLES]
        if not suffix:
            self._forget_position()
            views = self.conn.views()
            for name in reversed(VIEWS):
                if name in views:
                    self.conn.execute(f"DROP VIEW {name}")
                else:
                    tables.append(name)
        for table in tables:
            self.conn.execute(f"DROP TABLE IF EXISTS {table}")

    # -- catching up -------------------------------------------------------------
    def catch_up(self, target: int | None = None, progress: Progress = silent) -> int:
        """Apply the log up to ``target``; an empty projection facing at least ``full_replay_from``
        events (a new schema version, a first read of a big log) takes the rebuild's faster path."""
        target = self.log.last_index() if target is None else target
        position = self.position()
        if position >= target:
            return 0  # the common case before a read: two indexed lookups, nothing else
        if position == 0 and target >= self.full_replay_from and self.conn.fast_rebuild:
            try:
                return self.rebuild(target, progress)
            except ProjectionStopped:
                pass  # an event it cannot apply: the incremental path stops that namespace alone
        return super().catch_up(target, progress)

    def rebuild(self, target: int | None = None, progress: Progress = silent) -> int:
        """Replay the log from index 1 (up to ``target``) into new tables, then swap them in.

        A full rebuild folds the log by ranges of cell id, each range in memory and cell by cell
        (:mod:`projections.frontier_rebuild`, :mod:`pmem.adapters.readmodels.parallel_rebuild`), so it writes only the
        final rows, in primary-key order, into shadow tables without secondary indexes, a range of
        ``rebuild_chunk`` events streamed (at most that many held) and written in pieces
        (``rebuild_piece`` events), each piece
        committed on its own so writers to the log are never held up for long; from ``parallel_from``
        events on, worker processes fold a share of the ranges each. One last
        transaction drops the old tables, renames the shadow ones, builds the views and indexes and
        sets the position. Until that commits the old projection stays whole and readable; a crash before it
        leaves only shadow tables, which the next rebuild drops: it starts, under the write lock, by
        dropping every table whose name ends in :data:`SHADOW` (:meth:`_drop_shadow_tables`). Each
        rebuild's shadow tables have names of their own (:func:`shadow_suffix`), so a worker process of
        an earlier rebuild that still runs finds its tables gone and fails, instead of writing into
        this rebuild's (the workers also die with the process that started them:
        :func:`pmem.adapters.readmodels.parallel_rebuild.die_with_parent`).

        Where the backend does not offer it (``fast_rebuild``, see :mod:`pmem.adapters.storage.backend`), the
        tables are dropped and the log replayed from index 0 by the incremental path instead."""
        if not self.conn.fast_rebuild:
            return self._replay_in_place(target, progress)
        if not isinstance(self.conn, SqliteDb):
            raise TypeError(f"a fast rebuild needs a SQLite projection, not {type(self.conn).__name__}")
        raw = self.conn.raw
        target = self.log.last_index() if target is None else target
        self.projector.forget()
        self._cached_at = -1
        bar = progress(self.name, target)
        suffix = shadow_suffix()
        try:
            # Dropped tables' pages are not zeroed (this SQLite's build defaults to secure_delete ON,
            # which made the swap write every freed page again); their rows are a projection of the log
            # the same file keeps.
            with pragmas(raw, secure_delete="FAST"):
                with self._transaction():
                    self._drop_shadow_tables()
                    self._create_tables(suffix, indexes=False)
                with no_gc():
                    folded = self._fill_shadow(target, bar, raw, suffix)
                with self._transaction():
                    self._swap_in(suffix, target, raw)
        except BaseException as e:
            self._drop_shadow_after_failure()
            if isinstance(e, self.conn.errors):
                raise StoreUnavailable(f"cannot rebuild projection {self.name}: {e}") from e
            raise
        finally:
            bar.close()
        return folded

    def _swap_in(self, suffix: str, target: int, raw: sqlite3.Connection) -> None:
        """Put the filled shadow tables in place of the projection's, in the caller's transaction."""
        self._drop_tables()  # the views too: SQLite cannot rename a table while a view is broken
        for table in TABLES:
            self.conn.execute(f"ALTER TABLE {table}{suffix} RENAME TO {table}")
        self._create_views()
        # (the sort that builds an index is faster with the small cache and a helper thread per core:
        # 1,000,000 cells took 0.7 s against 1.3 s with the connection's 64 MiB and none,
        # docs/projections.md)
        with pragmas(raw, cache_size=-REBUILD_CACHE_KIB, threads=os.cpu_count() or 1):
            self._create_indexes()
        self._move_position(target)
        screening.remove(self.conn, self.name)

    def _drop_shadow_after_failure(self) -> None:
        """A failed rebuild leaves no shadow tables behind (the old projection is untouched)."""
        try:
            with self._transaction():
                self._drop_shadow_tables()
        except StoreUnavailable:
            pass  # the next rebuild drops them first

    def _replay_in_place(self, target: int | None, progress: Progress) -> int:
        """Drop the tables and catch up from index 0. The drop and the new empty tables commit
        together, so an interrupted rebuild leaves a consistent prefix."""
        with self._transaction():
            self._drop_tables()
            self._create_tables()
            screening.remove(self.conn, self.name)
        self.projector.forget()
        self._cached_at = 0
        batch_size = self.batch_size
        self.batch_size = max(batch_size, REBUILD_BATCH_SIZE)  # fewer commits and seed queries
        try:
            return super().catch_up(target, progress)
        finally:
            self.batch_size = batch_size

    def _drop_shadow_tables(self) -> None:
        """Drop every shadow table in the file, whichever rebuild (of whichever version) left it: any
        table whose name ends in :data:`SHADOW` (the caller holds the write lock). Their indexes go
        with them."""
        found = self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name GLOB ?",
                                  (f"*{SHADOW}",)).fetchall()
        for (name,) in sorted(found):
            quoted = name.replace('"', '""')
            self.conn.execute(f'DROP TABLE IF EXISTS "{quoted}"')

    def _fill_shadow(self, target: int, bar: Any, raw: sqlite3.Connection, suffix: str) -> int:
        """Fold the log into the shadow tables (``table + suffix``) by ranges of cells
        (:mod:`pmem.adapters.readmodels.parallel_rebuild`): this process folds the first share of the
        ranges and worker processes the others, each writing pieces of what it folds into the shadow
        tables, a transaction each (``raw``: this projection's connection)."""
        store = self._store_path()
        workers = self._workers(target, store)
        each = max(1, -(-target // (self.rebuild_chunk * workers)))  # ranges per process: as many for each
        ranges = cell_ranges(each * workers)
        shares = split(ranges, workers)
        procs: list[Any] = []
        # the writers leave checkpoints to the process waiting for the lock (parallel_rebuild.checkpointer)
        with pragmas(raw, wal_autocheckpoint=0, busy_timeout=None, cache_size=-REBUILD_CACHE_KIB):
            try:
                # about 8 pieces per process, so writing starts early and the lock changes hands often
                piece = min(self.rebuild_piece, max(MIN_PIECE_EVENTS, target // (8 * workers)))
                procs = [start_worker(store, share, target, len(ranges), suffix, piece)
                         for share in shares[1:]]
                with self._range_reader(store, target, len(ranges)) as (read, ordered):
                    folded = fold_ranges(shares[0], read, lambda out, wait: write_piece(raw, out, suffix, wait),
                                         piece, bar.update, checkpointer(raw), self.log.keys, ordered)
                for proc in procs:
                    folded += _advance(bar, finish_worker(proc))
            finally:
                stop_workers(procs)
        return folded

    @contextmanager
    def _range_reader(self, store: str, stop: int, ranges: int
                      ) -> Iterator[tuple[Callable[[CellRange], Iterable[RawRow]], bool]]:
        """How this process reads a range of cells (their data keys cached first), and whether it reads
        in cell order: a store file's rows are streamed from a read-only connection of their own, as a
        worker's are (:func:`~pmem.adapters.readmodels.parallel_rebuild.read_range`); an in-memory
        store's are fetched through the log."""
        def fetched(cells: CellRange) -> Iterable[RawRow]:
            self.log.load_keys(cells)
            rows: list[RawRow] = self.log.rows_of_cells(cells, stop, ranges)
            return rows

        if not store:
            yield fetched, False
            return
        src = read_only(store)

        def streamed(cells: CellRange) -> Iterable[RawRow]:
            self.log.load_keys(cells)
            return read_range(src, cells, stop, ranges)

        try:
            yield streamed, in_cell_order(ranges)
        finally:
            src.close()

    def _workers(self, target: int, store: str) -> int:
        """Processes a rebuild of ``target`` events folds with: one for a small log or an in-memory
        store (``store`` ""), else ``rebuild_workers`` (default: the cores)."""
        if target < self.parallel_from or not store:
            return 1
        return max(1, self.rebuild_workers or os.cpu_count() or 1)

    def _store_path(self) -> str:
        """The file the projection lives in ("" for an in-memory store)."""
        return str(self.conn.execute("PRAGMA database_list").fetchone()[2])

    def _seed_batch(self, events: Sequence[IndexedEvent], start: int) -> None:
        self._seed(self.projector.missing(events))

    def _write_rows(self, rows: Any) -> None:
        self.write(rows)

    def write(self, changes: Changes) -> None:
        """Upsert every changed row (the caller holds the transaction)."""
        for table, rows in changes.rows.items():
            if rows:
                self.conn.executemany(self.upsert_statement(table), rows.values())

    def upsert_statement(self, table: str) -> str:
        columns, pk = TABLES[table]
        return self.conn.upsert(table, list(columns), pk)

    def _forget_cells(self, cells: list[str]) -> None:
        """The version rows were rewritten by the projector; evidence added later keeps its source
        in ``evidence_events``."""
        self.conn.executemany("UPDATE evidence_events SET source=? WHERE cell_id=? AND source IS NOT NULL",
                              [(FORGOTTEN_TEXT, c) for c in cells])

    def _seed(self, ids: list[str]) -> None:
        """Load the stored state of these cells into the projector (new cells have none)."""
        for i in range(0, len(ids), _CHUNK):
            chunk = ids[i:i + _CHUNK]
            marks = ",".join("?" * len(chunk))
            found: dict[str, dict[str, list[Row]]] = {}
            for table in ("cells", "versions"):  # a version's row carries its current status
                for row in self.conn.execute(f"SELECT * FROM {table} WHERE cell_id IN ({marks})", chunk):
                    found.setdefault(row[0], {}).setdefault(table, []).append(row)
            for rows in found.values():
                (cell,) = rows["cells"]
                self.projector.seed(cell, rows.get("versions", []))


def shadow_suffix() -> str:
    """The suffix of one rebuild's shadow tables (``cells__3f9a0c1d__rebuild``): random, so no two
    rebuilds share tables, and ending in :data:`SHADOW`, so every rebuild's are found and dropped."""
    return f"__{secrets.token_hex(4)}{SHADOW}"


def create_statement(db: ProjectionDb, table: str, name: str) -> str:
    """``CREATE TABLE`` for ``table`` of :data:`TABLES` under ``name``, clustered by its primary key
    where the dialect can (SQLite ``WITHOUT ROWID``)."""
    columns, pk = TABLES[table]
    return create_table(db, name, columns, pk, NULLABLE.get(table, ())) + db.clustered


def _advance(bar: Any, events: int) -> int:
    bar.update(events)
    return events


from pmem.adapters.readmodels.graph_projection import GraphProjection  # noqa: E402  (it does not import this module)
from pmem.adapters.readmodels.lexical_projection import LexicalProjection  # noqa: E402  (nor does this one)

PROJECTIONS: dict[str, Any] = {NAME: FrontierProjection, GraphProjection.name: GraphProjection,
                               LexicalProjection.name: LexicalProjection}


def timed(fn: Any) -> tuple[Any, float]:
    """``(fn(), seconds it took)``."""
    t0 = time.perf_counter()
    result = fn()
    return result, round(time.perf_counter() - t0, 6)
