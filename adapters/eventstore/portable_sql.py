"""Reading a whole log consistently and writing one verbatim, on SQLite and on PostgreSQL.

A :class:`SqliteSnapshot` / :class:`PgSnapshot` reads the events, the op-id table, the data keys and
the key edition inside one read transaction (WAL snapshot / ``REPEATABLE READ``), streaming each
(a cursor, not a list), so an export is consistent while writers run and its memory does not grow
with the log. A :class:`SqliteSink` / :class:`PgSink` writes rows with their own event indices (the
write path numbers new events; an import keeps the source's numbers) inside one transaction that
also checks the target is empty: ``executemany`` over a generator on SQLite, binary ``COPY`` on
PostgreSQL. The tables themselves are made by opening the :class:`~.eventlog.EventLog` first.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pmem.adapters.eventstore.log_sql import KEY_COLUMNS, OP_ID_COLUMNS, PG_EVENTS, LogSql, PgDialect, SqliteDialect
from pmem.adapters.eventstore.portable import EventRow, KeyRow, OpIdRow
from pmem.adapters.storage.meta import META
from pmem.domain.errors import InvalidOperation
from pmem.domain.keys import KEY_EDITION

__all__ = ["PG_EVENTS", "SQLITE", "PgSink", "PgSnapshot", "SqliteSink", "SqliteSnapshot", "TargetNotEmpty"]
SQLITE = LogSql(SqliteDialect())
FETCH = 5_000  # rows a PostgreSQL server-side cursor hands over at a time


class TargetNotEmpty(InvalidOperation):
    kind = "target not empty"


def _edition(meta: dict[str, str], last: int) -> tuple[int, int | None]:
    """The key edition and ``key_edition_since`` of a store (storage.meta's rule when none is stored)."""
    edition = int(meta["key_edition"]) if "key_edition" in meta else (1 if last > 0 else KEY_EDITION)
    since = meta.get("key_edition_since")
    return edition, None if since is None else int(since)


class SqliteSnapshot:
    """One read transaction on a store file."""

    source = "sqlite"

    def __init__(self, path: str) -> None:
        # read-only, and not memory-mapped: mapped pages would count in the exporter's RSS as it reads the file
        self.conn = sqlite3.connect(f"{Path(path).as_uri()}?mode=ro", uri=True, isolation_level=None)
        self.conn.execute("BEGIN")
        self.last_index = int(self.conn.execute(SQLITE.log.last_index()).fetchone()[0])  # the snapshot starts here
        self.key_edition, self.since = _edition(dict(self._all(f"SELECT name, value FROM {META}", ())),
                                                self.last_index)

    def _all(self, sql: str, params: Sequence[Any]) -> Iterator[Any]:
        try:
            yield from self.conn.execute(sql, params)
        except sqlite3.OperationalError as e:
            if "no such table" not in str(e):  # a store written before that table existed has none
                raise

    def events(self, after: int) -> Iterator[EventRow]:
        return self._all(*SQLITE.log.rows(after + 1, None, None))

    def op_ids(self, after: int) -> Iterator[OpIdRow]:
        return self._all(SQLITE.ids.op_ids_after(), (after,))

    def keys(self) -> Iterator[KeyRow]:
        return self._all(SQLITE.ids.all_keys(), ())

    def close(self) -> None:
        self.conn.close()


class PgSnapshot:
    """One ``REPEATABLE READ`` read-only transaction on a store's schema."""

    source = "postgresql"

    def __init__(self, conninfo: dict[str, Any], schema: str) -> None:
        import psycopg

        self.sql = LogSql(PgDialect(schema))
        self.conn = psycopg.connect(**conninfo)
        self.conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        self.conn.read_only = True
        self.last_index = int(self._one(self.sql.log.last_index()))
        meta_table = self.sql.d.table(META)
        found = self.conn.execute("SELECT to_regclass(%s)", (meta_table,)).fetchone()
        meta = dict(self.conn.execute(f"SELECT name, value FROM {meta_table}").fetchall()) if found and found[0] \
            else {}
        self.key_edition, self.since = _edition(meta, self.last_index)

    def _one(self, sql: str) -> Any:
        row = self.conn.execute(sql).fetchone()
        return None if row is None else row[0]

    def _stream(self, sql: str, params: tuple[Any, ...]) -> Iterator[Any]:
        with self.conn.cursor(name=f"pmem_export_{id(sql)}") as c:
            c.itersize = FETCH
            c.execute(sql, params)
            yield from c

    def events(self, after: int) -> Iterator[EventRow]:
        sql, params = self.sql.log.rows(after + 1, None, None)
        return self._stream(sql, tuple(params))

    def op_ids(self, after: int) -> Iterator[OpIdRow]:
        return self._stream(self.sql.ids.op_ids_after(), (after,))

    def keys(self) -> Iterator[KeyRow]:
        return self._stream(self.sql.ids.all_keys(), ())

    def close(self) -> None:
        self.conn.rollback()
        self.conn.close()


class SqliteSink:
    """One ``BEGIN IMMEDIATE`` transaction on a store file (the write lock from the start)."""

    def __init__(self, path: str, synchronous: str = "FULL") -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, timeout=60)
        self.conn.execute(f"PRAGMA synchronous={synchronous}")
        self.conn.execute("BEGIN IMMEDIATE")
        if self.conn.execute(SQLITE.log.nonempty()).fetchone()[0]:
            self.rollback()
            raise TargetNotEmpty(f"cannot import into {path}: the store is not empty (import needs a new store)",
                                 field="db")

    def events(self, rows: Iterable[EventRow]) -> None:
        self.conn.executemany(f"INSERT INTO {SQLITE.d.events} ({SQLITE.log.verbatim_columns()}) "
                              "VALUES (?,?,?,?,?)", rows)

    def op_ids(self, rows: Iterable[OpIdRow]) -> None:
        self.conn.executemany(f"INSERT INTO {SQLITE.op_ids} VALUES (?,?,?)", rows)

    def keys(self, rows: Iterable[KeyRow]) -> None:
        self.conn.executemany(f"INSERT INTO {SQLITE.keys} VALUES (?,?,?)", rows)

    def meta(self, key_edition: int, since: int | None) -> None:
        self.conn.execute(f"CREATE TABLE IF NOT EXISTS {META} (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
        self.conn.execute(f"DELETE FROM {META} WHERE name IN ('key_edition', 'key_edition_since')")
        self.conn.executemany(f"INSERT INTO {META} VALUES (?, ?)", _meta_rows(key_edition, since))

    def commit(self) -> None:
        self.conn.execute("COMMIT")
        self.conn.close()

    def rollback(self) -> None:
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")
        self.conn.close()


class PgSink:
    """One transaction on a store's schema, holding the log's ``EXCLUSIVE`` table lock (as every write does)."""

    def __init__(self, conninfo: dict[str, Any], schema: str, label: str) -> None:
        import psycopg

        self.sql = LogSql(PgDialect(schema))
        self.conn = psycopg.connect(**conninfo)
        self.conn.execute(f"LOCK TABLE {self.sql.d.events} IN EXCLUSIVE MODE")
        found = self.conn.execute(self.sql.log.nonempty()).fetchone()
        if found and found[0]:
            self.rollback()
            raise TargetNotEmpty(f"cannot import into {label}: the store is not empty (import needs a new store)",
                                 field="db")

    def _copy(self, table: str, columns: str, types: list[str], rows: Iterable[tuple[Any, ...]]) -> None:
        with self.conn.cursor() as c, c.copy(f"COPY {table} ({columns}) FROM STDIN (FORMAT BINARY)") as cp:
            cp.set_types(types)
            for row in rows:
                cp.write_row(row)

    def events(self, rows: Iterable[tuple[Any, ...]]) -> None:
        self._copy(self.sql.d.events, self.sql.log.verbatim_columns(), ["int8", "uuid", "int8", "text", "bytea"], rows)

    def op_ids(self, rows: Iterable[OpIdRow]) -> None:
        self._copy(self.sql.op_ids, ", ".join(OP_ID_COLUMNS), ["text", "text", "int8"], rows)

    def keys(self, rows: Iterable[KeyRow]) -> None:
        self._copy(self.sql.keys, ", ".join(KEY_COLUMNS), ["text", "int8", "bytea"], rows)

    def meta(self, key_edition: int, since: int | None) -> None:
        table = self.sql.d.table(META)
        self.conn.execute(f"CREATE TABLE IF NOT EXISTS {table} (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
        self.conn.execute(f"DELETE FROM {table} WHERE name IN ('key_edition', 'key_edition_since')")
        with self.conn.cursor() as c:
            c.executemany(f"INSERT INTO {table} VALUES (%s, %s)", _meta_rows(key_edition, since))

    def commit(self) -> None:
        self.conn.commit()
        self.conn.close()

    def rollback(self) -> None:
        self.conn.rollback()
        self.conn.close()


def _meta_rows(key_edition: int, since: int | None) -> list[tuple[str, str]]:
    rows = [("key_edition", str(key_edition))]
    return rows if since is None else [*rows, ("key_edition_since", str(since))]
