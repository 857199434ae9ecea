"""The SQLite event log: eventsourcing's SQLite persistence, tuned and extended for P-Mem.

Selected with ``PERSISTENCE_MODULE=pmem.adapters.eventstore.sqlite_log``. On top of the stock recorder it
- opens every connection with ``synchronous=FULL`` (or the ``PMEM_SYNCHRONOUS`` setting) and a
  generous busy timeout, in WAL mode;
- inserts a batch with one ``executemany`` of the stock statement and returns its first event index;
- in the same transaction (:mod:`.log_access`, shared with PostgreSQL; every statement: :mod:`.log_sql`)
  records ``(namespace, op_id) -> event index`` under a unique constraint, so a resent operation is
  found and a concurrent duplicate fails cleanly; inserts the new data keys (:mod:`.sealing`) and
  deletes a forgotten cell's (its plaintext events scrubbed); writes the compact cell state
  (:mod:`.cell_state`);
- loads the events of many cells in one query, and one cell's events up to an event index.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

from eventsourcing.persistence import OperationalError
from eventsourcing.sqlite import (
    SQLiteApplicationRecorder,
    SQLiteConnection,
    SQLiteConnectionPool,
    SQLiteCursor,
    SQLiteDatastore,
    SQLiteFactory,
)

from pmem.adapters.eventstore.cell_state import StateWrites
from pmem.adapters.eventstore.log_access import CellStates, Forgetting, KeyRow, LogAccess, Row
from pmem.adapters.eventstore.log_sql import LogSql, SqliteDialect
from pmem.adapters.storage.write_turns import turn_for, write_turn

SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")
CHECKPOINT_TRIES = 40
CACHE_KIB = 65_536  # a connection's page cache: the (cell id, version) index stays in memory for reads
# ... but a streamed batch (a write of any size, chunk by chunk) keeps a smaller one: its page cache is
# most of its memory, and a smaller one costs a sequential write no time (docs/decisions.md)
STREAM_CACHE_KIB = 16_384


class TunedConnectionPool(SQLiteConnectionPool):
    synchronous = "FULL"

    def _create_connection(self) -> SQLiteConnection:
        # Switching a new file to WAL needs a moment of exclusive access, and SQLite reports "database
        # is locked" at once instead of waiting: several processes opening a fresh store together
        # would fail. Retry with backoff, within the same budget as the busy timeout.
        deadline = time.monotonic() + (self.lock_timeout or 60)
        delay = 0.005
        while True:
            try:
                conn = super()._create_connection()
                break
            except (OperationalError, sqlite3.OperationalError) as e:
                if "locked" not in str(e) and "busy" not in str(e) or time.monotonic() > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.25)
        raw = conn._sqlite_conn
        raw.execute(f"PRAGMA synchronous={self.synchronous}")
        raw.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
        raw.row_factory = None  # plain tuples: faster than sqlite3.Row
        return conn


class TunedDatastore(SQLiteDatastore):
    def __init__(self, db_name: str, *, synchronous: str, lock_timeout: int | None = None, **kw: Any):
        super().__init__(db_name, lock_timeout=lock_timeout, **kw)
        self.pool.close()
        pool = TunedConnectionPool(db_name=db_name, lock_timeout=lock_timeout)
        pool.synchronous = synchronous
        self.pool = pool


class PmemRecorder(LogAccess, SQLiteApplicationRecorder):
    """The application recorder plus op-id idempotency and bulk cell loading (its SQL: :mod:`.log_sql`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._local = threading.local()  # the cursor of a thread's open batch()
        self.sql = LogSql(SqliteDialect())
        self.states = CellStates(self)
        self._turn = turn_for(self.datastore.pool.db_name)  # this process's writers of the file queue on it

    def construct_create_table_statements(self) -> list[str]:
        return [*super().construct_create_table_statements(), *LogSql(SqliteDialect()).create_statements()]

    def insert_rows(self, rows: Iterable[Row], count: list[int], op_ids: Iterable[tuple[str, str, int]] = (),
                    keys: Iterable[KeyRow] = (), forgetting: Forgetting | None = None,
                    states: Callable[[], StateWrites] | None = None) -> int:
        """Insert rows ``(originator_id_hex, version, topic, state)`` in one transaction; return the
        event index of the first (the rest follow consecutively).

        ``rows`` may be a generator that encodes each event as it is bound: each encoded body is then
        freed before the next is made, several times faster than building them all first. It must
        keep ``count[0]`` equal to the rows it has produced. ``op_ids`` are ``(namespace, op_id,
        position in rows)``, read after the rows are consumed and written in the same transaction, as
        are the new data ``keys`` and what ``forgetting`` deletes and scrubs (``secure_delete`` on: the
        freed bytes are overwritten), and the compact cell ``states`` (called once the rows are consumed).
        """
        with self._tx(commit=True) as c:
            if forgetting is not None:
                c.execute("PRAGMA secure_delete=ON")
            first = self._insert_rows(c, rows, count)
            self._write_beside(c, first, count[0], op_ids, keys, forgetting, states)
            return first

    @contextmanager
    def _transaction(self, *, commit: bool) -> Iterator[Any]:
        if not commit:
            with self.datastore.transaction(commit=False) as c:
                yield c
            return
        # (the turn first: a writer of this process then never sleeps in SQLite's busy handler behind another)
        with write_turn(self._turn), self.datastore.transaction(commit=True) as c:
            yield c

    def _begin_batch(self, c: Any) -> None:
        c.execute(f"DELETE FROM {self.sql.keys} WHERE 0")  # a no-op write waits for the lock as any write does
        c.execute(f"PRAGMA cache_size=-{STREAM_CACHE_KIB}")  # memory bounded by a chunk

    def _end_batch(self, c: Any) -> None:
        with suppress(sqlite3.Error):  # (a broken connection must not hide the batch's error)
            c.execute(f"PRAGMA cache_size=-{CACHE_KIB}")

    def checkpoint(self) -> None:
        """Copy the WAL into the file and truncate it to zero bytes (after a forget: the WAL then holds
        no page that had the plaintext). A reader in the middle of a transaction holds the WAL: tried
        again for up to ``CHECKPOINT_TRIES`` times 50 ms, then left to SQLite's next checkpoint."""
        for _ in range(CHECKPOINT_TRIES):
            with self.datastore.get_connection(commit=True) as conn:
                busy = conn._sqlite_conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if busy is None or not busy[0]:
                return
            time.sleep(0.05)

    def _insert_rows(self, c: SQLiteCursor, rows: Iterable[Row], count: list[int]) -> int:
        """Insert ``rows`` with the library's statement; the first's index."""
        c.executemany(self.insert_events_statement, rows)
        # We hold the write lock, so the rows took consecutive rowids ending at the maximum.
        c.execute(self.sql.log.last_index())
        return int(c.fetchone()[0]) - count[0] + 1

    def integrity_check(self) -> str:
        with self._tx(commit=False) as c:
            c.execute("PRAGMA integrity_check")
            return str(c.fetchone()[0])


class Factory(SQLiteFactory):
    """The persistence factory ``eventsourcing`` finds in this module."""

    application_recorder_class = PmemRecorder

    def __init__(self, env: Any):
        super().__init__(env)
        sync = (self.env.get("PMEM_SYNCHRONOUS") or "FULL").upper()
        if sync not in SYNCHRONOUS:
            raise OSError(f"PMEM_SYNCHRONOUS must be one of {', '.join(SYNCHRONOUS)}, got {sync!r}")
        self.datastore.close()
        timeout = int(self.env.get(self.SQLITE_LOCK_TIMEOUT) or 60)
        db_name = self.env.get(self.SQLITE_DBNAME)
        assert db_name is not None  # SQLiteFactory.__init__ raised OSError if it were not set
        self.datastore = TunedDatastore(db_name, synchronous=sync, lock_timeout=timeout)


def is_sqlite_error(e: BaseException) -> bool:
    return isinstance(e, sqlite3.Error)
