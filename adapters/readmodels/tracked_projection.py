"""What every positioned projection shares (STYLE habit 4), on SQLite or PostgreSQL
(:mod:`pmem.adapters.storage.projection_db`).

A projection keeps one row in ``pmem_tracking``: its name, the index of the last event it applied and
the schema version of its rows. The position moves in the same transaction as the rows, so a crash or
an error rolls both back and the next catch-up resumes from the last committed batch; a batch whose
start no longer matches the stored position was applied by another process and is skipped.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from pmem.adapters.progress import Progress, silent
from pmem.adapters.storage.projection_db import ProjectionDb, as_db
from pmem.domain.errors import StoreUnavailable
from pmem.projections.replay import IndexedEvent

TRACKING = "pmem_tracking"
WRITE_LOCK = "projections"


def tracked_position(conn: ProjectionDb, name: str) -> int:
    """The position projection ``name`` records, without creating anything (0 when it has none):
    ``pmem stats`` reads it and must not write."""
    if TRACKING not in conn.names():
        return 0
    row = conn.execute(f"SELECT position FROM {TRACKING} WHERE name=?", (name,)).fetchone()
    return 0 if row is None else int(row[0])


class TrackedProjection:
    """Base of the projections: position, schema version, catch-up in batches, transactions."""

    name: str
    version: int

    def __init__(self, conn: ProjectionDb | sqlite3.Connection, log: Any, projector: Any, *,
                 batch_size: int) -> None:
        self.conn = as_db(conn)
        self.log = log  # pmem.adapters.eventstore.eventlog.EventLog: indexed_events(start, stop) and last_index()
        self.batch_size = batch_size
        self.projector = projector
        self._cached_at = 0  # the position the projector's cached cells correspond to
        try:
            self.create_tables()
        except self.conn.errors as e:
            raise StoreUnavailable(f"cannot set up projection {self.name}: {e}") from e

    def create_tables(self) -> None:
        """Create what is missing; drop and recreate rows written by another schema version."""
        raise NotImplementedError

    def position(self) -> int:
        """The index of the last event applied (0 before any)."""
        row = self.conn.execute(f"SELECT position FROM {TRACKING} WHERE name=?", (self.name,)).fetchone()
        return 0 if row is None else int(row[0])

    def stored_version(self) -> int | None:
        """The schema version the stored rows were written with (None before any)."""
        row = self.conn.execute(f"SELECT version FROM {TRACKING} WHERE name=?", (self.name,)).fetchone()
        return None if row is None else int(row[0])

    def stats(self, last_index: int | None = None) -> dict[str, int]:
        last = self.log.last_index() if last_index is None else last_index
        position = self.position()
        return {"position": position, "lag": max(last - position, 0)}

    def catch_up(self, target: int | None = None, progress: Progress = silent) -> int:
        """Apply the log up to ``target`` (default: its last index); return the events applied.
        ``progress`` is told how far each committed batch moved the position."""
        target = self.log.last_index() if target is None else target
        applied = 0
        bar = progress(self.name, max(target - self.position(), 0))
        try:
            while (position := self.position()) < target:
                stop = min(position + self.batch_size, target)
                applied += self._apply_batch(position, stop, list(self.log.indexed_events(position + 1, stop)))
                bar.update(self.position() - position)
        finally:
            bar.close()
        return applied

    def _apply_batch(self, start: int, stop: int, events: Sequence[IndexedEvent]) -> int:
        """Apply ``events`` (indices ``start+1..stop``) and move the position to ``stop``, in one
        transaction. Returns 0 without writing when another process moved the position first."""
        try:
            with self._transaction():
                if self.position() != start:
                    return 0  # someone else applied this batch: the caller re-reads the position
                if self._cached_at != start:
                    self.projector.forget()
                self._seed_batch(events, start)
                for index, event in events:
                    self.projector.apply(index, event)
                self._write_rows(self.projector.flush())
                forgotten = sorted({e.originator_id.hex for _, e in events if e.OP == "forget"})
                if forgotten:
                    self._forget_cells(forgotten)
                self._move_position(stop)
        except BaseException:
            self.projector.forget()
            self._cached_at = -1
            raise
        self._cached_at = stop
        return len(events)

    def rebuild(self, target: int | None = None, progress: Progress = silent) -> int:
        """Drop the rows and the position, create the tables again and replay the log from index 1;
        return the events applied. (The frontier projection has a parallel rebuild of its own.)"""
        with self._transaction():
            self._drop()
            self._create()
        self.projector.forget()
        self._cached_at = 0
        return self.catch_up(target, progress)

    def _drop(self) -> None:
        """Drop this projection's tables and forget its position (the caller holds the transaction)."""
        raise NotImplementedError

    def _create(self) -> None:
        """Create this projection's tables (the caller holds the transaction)."""
        raise NotImplementedError

    def _seed_batch(self, events: Sequence[IndexedEvent], start: int) -> None:
        """Give the projector the state, as of ``start``, of the batch's cells it does not hold."""
        raise NotImplementedError

    def _write_rows(self, rows: Any) -> None:
        """Write what the projector flushed (the caller holds the transaction)."""
        raise NotImplementedError

    def _forget_cells(self, cells: list[str]) -> None:
        """Scrub what the rows written so far still hold of these forgotten cells' values, texts and
        sources (the caller holds the transaction; docs/forgetting.md). Nothing by default."""

    def _move_position(self, stop: int) -> None:
        self.conn.execute(self.conn.upsert(TRACKING, ("name", "position", "version"), ("name",)),
                          (self.name, stop, self.version))

    def _create_tracking(self) -> None:
        self.conn.execute(f"CREATE TABLE IF NOT EXISTS {TRACKING} (name TEXT PRIMARY KEY, "
                          f"position {self.conn.int_type} NOT NULL, version {self.conn.int_type} NOT NULL)")

    def _forget_position(self) -> None:
        self.conn.execute(f"DELETE FROM {TRACKING} WHERE name=?", (self.name,))

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """One write transaction, taken with the write lock up front (on PostgreSQL: one advisory lock
        for every projection of the schema, as SQLite has one writer per file: a rebuild's DROP then
        never meets another process's batch half-way). Driver errors become :class:`StoreUnavailable`."""
        try:
            with self.conn.write(WRITE_LOCK):
                yield
        except self.conn.errors as e:
            raise StoreUnavailable(f"cannot update projection {self.name}: {e}") from e
