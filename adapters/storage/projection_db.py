"""The database the projections write to, as one small interface over SQLite and PostgreSQL.

The projections' SQL is shared: it is written once with ``?`` and ``:name`` placeholders and the
common subset of both dialects (``ON CONFLICT``, partial indexes, ``IF NOT EXISTS``). What differs
lives here and in :mod:`pmem.adapters.storage.pg_db`:

- ``write(lock)``: one write transaction. SQLite takes its single write lock up front
  (``BEGIN IMMEDIATE``); PostgreSQL takes a transaction-scoped advisory lock named ``lock``, so two
  processes catching up the same projection serialise exactly as they do on one SQLite file.
- ``snapshot()``: one read transaction that sees one committed state.
- ``upsert``, ``create_table``, ``create_view``, ``names`` and ``views``: the statements and catalog
  queries of each dialect (``names`` lists tables, views and indexes; ``views`` only the views);
  ``ensure_table``: creates a table if missing (sqlite-utils on SQLite, ``create_table`` on PostgreSQL);
  ``clustered``: what makes a table one B-tree ordered by its primary key (SQLite ``WITHOUT ROWID``;
  nothing on PostgreSQL, whose primary-key index serves the same reads).
- ``fast_rebuild``: set by :mod:`pmem.adapters.storage.backend`, which decides it.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from pmem.adapters.storage.write_turns import busy, file_of, turn_for, write_turn
from pmem.domain.errors import StoreUnavailable

Params = Sequence[Any] | Mapping[str, Any]


class ProjectionDb(Protocol):
    """What a projection needs from its database."""

    errors: tuple[type[BaseException], ...]  # the driver's errors, translated by the callers
    int_type: str
    clustered: str  # appended to CREATE TABLE for a table clustered by its primary key
    fast_rebuild: bool  # the frontier may rebuild through shadow tables (pmem.adapters.storage.backend decides)

    def execute(self, sql: str, params: Params = ()) -> Any: ...

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> Any: ...

    def write(self, lock: str) -> Any: ...

    def write_busy(self) -> bool: ...  # whether a write now would wait for another of this process

    def snapshot(self) -> Any: ...

    def names(self) -> set[str]: ...

    def views(self) -> set[str]: ...

    def create_view(self, name: str, select: str) -> str: ...

    def upsert(self, table: str, columns: Sequence[str], pk: Sequence[str]) -> str: ...

    def ensure_table(self, table: str, columns: Mapping[str, type], pk: Sequence[str],
                     nullable: Iterable[str] = ()) -> None: ...

    def close(self) -> None: ...


def create_table(db: ProjectionDb, table: str, columns: Mapping[str, type], pk: Sequence[str],
                 nullable: Iterable[str] = ()) -> str:
    """``CREATE TABLE IF NOT EXISTS`` in ``db``'s dialect (int columns are 64-bit on both)."""
    optional = set(nullable)
    cols = ", ".join(f"{c} {db.int_type if t is int else 'TEXT'}{'' if c in optional else ' NOT NULL'}"
                     for c, t in columns.items())
    return f"CREATE TABLE IF NOT EXISTS {table} ({cols}, PRIMARY KEY ({', '.join(pk)}))"


class SqliteDb:
    """A SQLite connection in autocommit mode (transactions are explicit)."""

    errors: tuple[type[BaseException], ...] = (sqlite3.Error,)
    int_type = "INTEGER"
    clustered = " WITHOUT ROWID"

    def __init__(self, conn: sqlite3.Connection, *, fast_rebuild: bool = True) -> None:
        self.raw = conn
        self.fast_rebuild = fast_rebuild
        self._turn = turn_for(file_of(conn))  # this process's writers of the file queue on it (.write_turns)

    def execute(self, sql: str, params: Params = ()) -> sqlite3.Cursor:
        return self.raw.execute(sql, params)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> sqlite3.Cursor:
        return self.raw.executemany(sql, rows)

    @contextmanager
    def write(self, lock: str) -> Iterator[None]:
        """One write transaction with the file's write lock taken up front (``lock`` is not needed:
        SQLite has one writer at a time), after this process's other writers of the file (.write_turns)."""
        with write_turn(self._turn):
            self.raw.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self.raw.execute("ROLLBACK")
                raise
            self.raw.execute("COMMIT")

    def write_busy(self) -> bool:
        return busy(self._turn)

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        self.raw.execute("BEGIN")
        try:
            yield
        finally:
            self.raw.execute("COMMIT")

    def ensure_table(self, table: str, columns: Mapping[str, type], pk: Sequence[str],
                     nullable: Iterable[str] = ()) -> None:
        """Create ``table`` if it does not exist, through sqlite-utils (its types: int -> INTEGER,
        str -> TEXT, as :func:`create_table` writes them)."""
        import sqlite_utils

        optional = set(nullable)
        sqlite_utils.Database(self.raw, execute_plugins=False).table(table).create(
            dict(columns), pk=tuple(pk), not_null={c for c in columns if c not in optional}, if_not_exists=True)

    def names(self) -> set[str]:
        return {r[0] for r in self.raw.execute("SELECT name FROM sqlite_master")}

    def views(self) -> set[str]:
        return {r[0] for r in self.raw.execute("SELECT name FROM sqlite_master WHERE type = 'view'")}

    def create_view(self, name: str, select: str) -> str:
        return f"CREATE VIEW IF NOT EXISTS {name} AS {select}"

    def upsert(self, table: str, columns: Sequence[str], pk: Sequence[str]) -> str:
        return f"INSERT OR REPLACE INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"

    def close(self) -> None:
        self.raw.close()


def as_db(conn: ProjectionDb | sqlite3.Connection) -> ProjectionDb:
    """A bare ``sqlite3`` connection (as tests pass one for a private in-memory projection) is wrapped."""
    return SqliteDb(conn) if isinstance(conn, sqlite3.Connection) else conn


def connect(db: str, synchronous: str = "NORMAL") -> sqlite3.Connection:
    """A connection for projections: the store's file, or a private memory database for an
    in-memory store (a shared-cache memory database would lock tables instead of waiting).

    ``NORMAL`` is enough in WAL mode for derived data: a power cut can lose the last projection
    transactions (rows and position together, never one without the other), never corrupt the file,
    and the next catch-up re-derives them from the log, which keeps its own ``FULL`` setting. The
    log has already put the file in WAL mode (a persistent setting), so this does not set it again."""
    path = ":memory:" if db.startswith("file:") and "mode=memory" in db else db
    try:
        conn = sqlite3.connect(read_only_uri(path) or path, timeout=60, isolation_level=None,
                               check_same_thread=False, uri=True)
        conn.execute(f"PRAGMA synchronous={synchronous}")
        conn.execute("PRAGMA cache_size=-65536")  # 64 MiB: the primary-key indexes stay in memory
    except sqlite3.Error as e:
        raise StoreUnavailable(f"cannot open projections in {db}: {e}") from e
    return conn


def read_only_uri(path: str) -> str | None:
    """A read-only URI for a store file this process cannot write (a read-only file system, or a file
    without write permission), so that reads still work; None for any other. Without its ``-shm``
    file in a directory that cannot be written, SQLite can only read a WAL-mode file as immutable,
    which is what such a medium is."""
    file = Path(path)
    if path == ":memory:" or not file.is_file() or os.access(file, os.W_OK):
        return None
    shm = file.with_name(file.name + "-shm")
    immutable = not shm.exists() and not os.access(file.parent, os.W_OK)
    return f"{file.resolve().as_uri()}?mode=ro" + ("&immutable=1" if immutable else "")
