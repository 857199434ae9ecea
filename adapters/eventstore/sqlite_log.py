"""The SQLite event log: eventsourcing's SQLite persistence, tuned and extended for P-Mem.

Selected with ``PERSISTENCE_MODULE=pmem.adapters.eventstore.sqlite_log``. On top of the stock recorder it
- opens every connection with ``synchronous=FULL`` (or the ``PMEM_SYNCHRONOUS`` setting) and a
  generous busy timeout, in WAL mode;
- inserts a batch with one ``executemany`` and returns the notification ids (event indices);
- records ``(namespace, op_id) -> event index`` in the same transaction as the events, under a
  unique constraint, so a resent operation is found and a concurrent duplicate fails cleanly;
- loads the events of many cells in one query, and one cell's events up to an event index;
- keeps the cells' data keys (``pmem_keys``, :mod:`.sealing`): new keys are inserted, and a
  forgotten cell's key deleted (its plaintext events scrubbed), in the transaction of the events;
- keeps the compact cell state (``pmem_cells``, ``pmem_chain``: :mod:`.cell_state`) in the same
  transactions, and reads it for many cells at once.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any, NamedTuple
from uuid import UUID

from eventsourcing.persistence import OperationalError, StoredEvent
from eventsourcing.sqlite import (
    SQLiteApplicationRecorder,
    SQLiteConnection,
    SQLiteConnectionPool,
    SQLiteCursor,
    SQLiteDatastore,
    SQLiteFactory,
)

from pmem.adapters.eventstore.cell_state import ChainRow, StateWrites

SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")
_CHUNK = 500
_CHAIN_CHUNK = 200  # each VALUES row is a term of the chain query's compound SELECT: SQLite allows 500
CHECKPOINT_TRIES = 40
CACHE_KIB = 65_536  # a connection's page cache: the (cell id, version) index stays in memory for reads
# ... but a streamed batch (a write of any size, chunk by chunk) keeps a smaller one: its page cache is
# most of its memory, and a smaller one costs a sequential write no time (docs/decisions.md)
STREAM_CACHE_KIB = 16_384
Row = tuple[str, int, str, bytes]
KeyRow = tuple[str, int, bytes]  # (cell id hex, life, key)
ScrubRow = tuple[bytes, str, int]  # (new state, cell id hex, revision)


class Forgetting(NamedTuple):
    """What a ``forget`` batch changes beside appending its events: the cells whose keys go, and the
    plaintext (never sealed) events of those cells, rewritten without their sensitive fields."""

    cells: list[str]
    scrub: list[ScrubRow]


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


class PmemRecorder(SQLiteApplicationRecorder):
    """The application recorder plus op-id idempotency and bulk cell loading."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._local = threading.local()  # the cursor of a thread's open batch()
        self.states = SqliteStates(self)

    def construct_create_table_statements(self) -> list[str]:
        return [
            *super().construct_create_table_statements(),
            "CREATE TABLE IF NOT EXISTS pmem_op_ids ("
            "namespace TEXT NOT NULL, op_id TEXT NOT NULL, event_index INTEGER NOT NULL, "
            "PRIMARY KEY (namespace, op_id)) WITHOUT ROWID",
            "CREATE TABLE IF NOT EXISTS pmem_keys (cell_id TEXT PRIMARY KEY, life INTEGER NOT NULL, "
            "key BLOB NOT NULL) WITHOUT ROWID",
            "CREATE TABLE IF NOT EXISTS pmem_cells (cell_id TEXT PRIMARY KEY, namespace TEXT NOT NULL, "
            "revision INTEGER NOT NULL, state BLOB NOT NULL) WITHOUT ROWID",
            "CREATE TABLE IF NOT EXISTS pmem_chain (cell_id TEXT NOT NULL, vid INTEGER NOT NULL, "
            "value TEXT NOT NULL, trust INTEGER NOT NULL, below INTEGER, "
            "PRIMARY KEY (cell_id, vid)) WITHOUT ROWID",
        ]

    def _insert_events(
        self, c: SQLiteCursor, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        rows = [(s.originator_id.hex if isinstance(s.originator_id, UUID) else s.originator_id,
                 s.originator_version, s.topic, s.state) for s in stored_events]
        first = self._insert_rows(c, rows, [len(rows)], kwargs.get("op_ids", ()))
        return list(range(first, first + len(rows)))

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
            first = self._insert_rows(c, rows, count, op_ids)
            key_rows = list(keys)
            if key_rows:
                c.executemany("INSERT INTO pmem_keys VALUES (?,?,?)", key_rows)
            if forgetting is not None:
                c.executemany("DELETE FROM pmem_keys WHERE cell_id=?", [(cell,) for cell in forgetting.cells])
                c.executemany(f"UPDATE {self.events_table_name} SET state=? WHERE originator_id=? AND "
                              "originator_version=?", forgetting.scrub)
            if states is not None:
                self.states.write(c, states())
            return first

    @contextmanager
    def batch(self) -> Iterator[None]:
        """One write transaction around many :meth:`insert_rows` (a batch streamed in chunks): every
        insert and read of this thread inside it goes through it, so each chunk sees the chunks before
        it; an exception rolls it all back. The write lock is taken first (a no-op write waits for it
        as any write does), so what is read inside is current and no other writer interleaves."""
        with self.datastore.transaction(commit=True) as c:
            c.execute("DELETE FROM pmem_keys WHERE 0")
            c.execute(f"PRAGMA cache_size=-{STREAM_CACHE_KIB}")  # memory bounded by a chunk
            self._local.cursor = c
            try:
                yield
            finally:
                self._local.cursor = None
                with suppress(sqlite3.Error):  # (a broken connection must not hide the batch's error)
                    c.execute(f"PRAGMA cache_size=-{CACHE_KIB}")

    @contextmanager
    def _tx(self, *, commit: bool) -> Iterator[Any]:
        """The cursor of this thread's open :meth:`batch`, else a transaction of its own."""
        open_cursor = getattr(self._local, "cursor", None)
        if open_cursor is not None:
            yield open_cursor
            return
        with self.datastore.transaction(commit=commit) as c:
            yield c

    def select_keys(self, cells: Sequence[str]) -> dict[str, tuple[int, bytes]]:
        """``cell id hex -> (life, key)`` of those of ``cells`` that have a data key."""
        with self._tx(commit=False) as c:
            c.execute(f"SELECT cell_id, life, key FROM pmem_keys WHERE cell_id IN ({','.join('?' * len(cells))})",
                      list(cells))
            return {r[0]: (int(r[1]), bytes(r[2])) for r in c.fetchall()}

    def select_keys_range(self, cells: tuple[str, str | None]) -> dict[str, tuple[int, bytes]]:
        """The data keys of the cells in a range of cell ids."""
        from pmem.adapters.eventstore.sealing import range_sql

        with self._tx(commit=False) as c:
            c.execute(*range_sql(*cells))
            return {r[0]: (int(r[1]), bytes(r[2])) for r in c.fetchall()}

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

    def _insert_rows(self, c: SQLiteCursor, rows: Iterable[Row], count: list[int],
                     op_ids: Iterable[tuple[str, str, int]]) -> int:
        c.executemany(self.insert_events_statement, rows)
        # We hold the write lock, so the rows took consecutive rowids ending at the maximum.
        c.execute(self.select_max_notification_id_statement)
        first = int(c.fetchone()[0] or 0) - count[0] + 1
        id_rows = [(ns, op_id, first + pos) for ns, op_id, pos in op_ids]
        if id_rows:
            c.executemany("INSERT INTO pmem_op_ids VALUES (?,?,?)", id_rows)
        return first

    # -- reads ---------------------------------------------------------------
    def select_cells(self, ids: Sequence[UUID], upto: int | None = None) -> dict[str, list[tuple[Any, ...]]]:
        """Rows ``(rowid, originator_id_hex, version, topic, state)`` per cell, in version order."""
        out: dict[str, list[tuple[Any, ...]]] = {}
        hexes = [i.hex for i in ids]
        with self._tx(commit=False) as c:
            for start in range(0, len(hexes), _CHUNK):
                chunk = hexes[start:start + _CHUNK]
                sql = (f"SELECT rowid, originator_id, originator_version, topic, state FROM "
                       f"{self.events_table_name} WHERE originator_id IN ({','.join('?' * len(chunk))})")
                params: list[Any] = list(chunk)
                if upto is not None:
                    sql += " AND rowid<=?"
                    params.append(upto)
                c.execute(sql + " ORDER BY originator_id, originator_version", params)
                for row in c.fetchall():
                    out.setdefault(row[1], []).append(row)
        return out

    def select_cells_after(self, cells: Sequence[tuple[str, int]], upto: int) -> dict[str, list[tuple[Any, ...]]]:
        """As :meth:`select_cells`, but of each ``(cell id hex, revision)`` only the rows after that
        revision (and with index ``<= upto``): a fold that goes on from where it stopped reads only those."""
        out: dict[str, list[tuple[Any, ...]]] = {}
        with self._tx(commit=False) as c:
            for start in range(0, len(cells), _CHUNK):
                chunk = cells[start:start + _CHUNK]
                c.execute(f"WITH w(id, v) AS (VALUES {','.join(['(?,?)'] * len(chunk))}) "
                          f"SELECT e.rowid, e.originator_id, e.originator_version, e.topic, e.state FROM w "
                          f"JOIN {self.events_table_name} e ON e.originator_id = w.id AND e.originator_version > w.v "
                          "WHERE e.rowid <= ? ORDER BY e.originator_id, e.originator_version",
                          [x for pair in chunk for x in pair] + [upto])
                for row in c.fetchall():
                    out.setdefault(row[1], []).append(row)
        return out

    def select_rows(self, start: int, stop: int | None, limit: int) -> list[tuple[Any, ...]]:
        """Rows ``(rowid, originator_id_hex, version, topic, state)`` with ``start <= rowid <= stop``."""
        sql = (f"SELECT rowid, originator_id, originator_version, topic, state FROM {self.events_table_name} "
               f"WHERE rowid>=?")
        params: list[Any] = [start]
        if stop is not None:
            sql += " AND rowid<=?"
            params.append(stop)
        with self._tx(commit=False) as c:
            c.execute(sql + " ORDER BY rowid LIMIT ?", [*params, limit])
            return list(c.fetchall())

    def select_rows_of_cells(self, cells: tuple[str, str | None], stop: int, ranges: int) -> list[tuple[Any, ...]]:
        """Rows ``(rowid, originator_id_hex, version, topic, state)`` with ``rowid <= stop`` of the cells
        in the range ``cells``, one of ``ranges`` (see ``stored_log.range_rows``)."""
        from pmem.adapters.eventstore.stored_log import range_query

        with self._tx(commit=False) as c:
            c.execute(*range_query(self.events_table_name, cells, stop, ranges))
            return list(c.fetchall())

    def lookup_op_ids(self, namespace: str, op_ids: Sequence[str]) -> dict[str, int]:
        found: dict[str, int] = {}
        with self._tx(commit=False) as c:
            for start in range(0, len(op_ids), _CHUNK):
                chunk = list(op_ids[start:start + _CHUNK])
                c.execute(f"SELECT op_id, event_index FROM pmem_op_ids WHERE namespace=? AND op_id IN "
                          f"({','.join('?' * len(chunk))})", [namespace, *chunk])
                found.update(dict(c.fetchall()))
        return found

    def cells_at(self, indices: Sequence[int]) -> list[tuple[int, str]]:
        """``(event index, cell id hex)`` of each of the events at ``indices`` that exists."""
        out: list[tuple[int, str]] = []
        with self._tx(commit=False) as c:
            for start in range(0, len(indices), _CHUNK):
                chunk = list(indices[start:start + _CHUNK])
                c.execute(f"SELECT rowid, originator_id FROM {self.events_table_name} WHERE rowid IN "
                          f"({','.join('?' * len(chunk))})", chunk)
                out.extend(c.fetchall())
        return out

    def max_notification_id(self) -> int:
        return super().max_notification_id() or 0

    def integrity_check(self) -> str:
        with self._tx(commit=False) as c:
            c.execute("PRAGMA integrity_check")
            return str(c.fetchone()[0])


class SqliteStates:
    """The compact cell state's tables (:mod:`.cell_state`), read and written through a recorder's
    transactions."""

    def __init__(self, recorder: Any) -> None:
        self.r = recorder

    def write(self, c: Any, w: StateWrites) -> None:
        """Write the compact cell state's changes (:mod:`.cell_state`) with cursor ``c``."""
        c.executemany("DELETE FROM pmem_chain WHERE cell_id=?", [(h,) for h in w.cleared])
        c.executemany("DELETE FROM pmem_chain WHERE cell_id=? AND vid=?", w.unchained)
        c.executemany("INSERT OR REPLACE INTO pmem_chain VALUES (?,?,?,?,?)", w.chain)
        c.executemany("INSERT OR REPLACE INTO pmem_cells VALUES (?,?,?,?)", w.states)

    def save(self, w: StateWrites) -> None:
        """Write ``w`` in this thread's open batch, or a transaction of its own."""
        with self.r._tx(commit=True) as c:
            self.write(c, w)

    def select(self, cells: Sequence[str]) -> dict[str, tuple[int, bytes]]:
        """``cell id hex -> (revision, compact state)`` of those of ``cells`` that have events."""
        out: dict[str, tuple[int, bytes]] = {}
        with self.r._tx(commit=False) as c:
            for start in range(0, len(cells), _CHUNK):
                chunk = list(cells[start:start + _CHUNK])
                c.execute(f"SELECT cell_id, revision, state FROM pmem_cells WHERE cell_id IN "
                          f"({','.join('?' * len(chunk))})", chunk)
                out.update((r[0], (int(r[1]), bytes(r[2]))) for r in c.fetchall())
        return out

    def chain(self, starts: Sequence[tuple[str, int, int]]) -> list[ChainRow]:
        """The chain rows of each ``(cell id hex, first version id, rows)``: that many rows at most,
        following each row's ``below`` (:mod:`.cell_state`)."""
        out: list[ChainRow] = []
        with self.r._tx(commit=False) as c:
            for start in range(0, len(starts), _CHAIN_CHUNK):
                chunk = starts[start:start + _CHAIN_CHUNK]
                c.execute(f"WITH RECURSIVE w(cell_id, vid, n, k) AS (VALUES {','.join(['(?,?,1,?)'] * len(chunk))} "
                          "UNION ALL SELECT w.cell_id, c.below, w.n + 1, w.k FROM w JOIN pmem_chain c "
                          "ON c.cell_id = w.cell_id AND c.vid = w.vid WHERE w.n < w.k AND c.below IS NOT NULL) "
                          "SELECT c.cell_id, c.vid, c.value, c.trust, c.below FROM w "
                          "JOIN pmem_chain c ON c.cell_id = w.cell_id AND c.vid = w.vid",
                          [x for s in chunk for x in s])
                out.extend(c.fetchall())
        return out

    def counts(self) -> tuple[int, int]:
        """(cells, namespaces) that hold events."""
        with self.r._tx(commit=False) as c:
            c.execute("SELECT count(*), count(DISTINCT namespace) FROM pmem_cells")
            cells, namespaces = c.fetchone()
            return int(cells), int(namespaces)


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
