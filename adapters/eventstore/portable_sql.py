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
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pmem.adapters.eventstore.portable import EventRow, KeyRow, OpIdRow
from pmem.adapters.eventstore.stored_log import EVENTS_TABLE
from pmem.adapters.storage.meta import META
from pmem.domain.errors import InvalidOperation
from pmem.domain.keys import KEY_EDITION

OP_IDS, KEYS = "pmem_op_ids", "pmem_keys"
PG_EVENTS = "pmem_events"  # eventsourcing names the PostgreSQL table after the application (EventLog.name)
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
        row = self.conn.execute(f"SELECT MAX(rowid) FROM {EVENTS_TABLE}").fetchone()  # the snapshot starts here
        self.last_index = int(row[0] or 0)
        self.key_edition, self.since = _edition(dict(self._all(f"SELECT name, value FROM {META}", ())),
                                                self.last_index)

    def _all(self, sql: str, params: tuple[Any, ...]) -> Iterator[Any]:
        try:
            yield from self.conn.execute(sql, params)
        except sqlite3.OperationalError as e:
            if "no such table" not in str(e):  # a store written before that table existed has none
                raise

    def events(self, after: int) -> Iterator[EventRow]:
        return self._all(f"SELECT rowid, originator_id, originator_version, topic, state FROM {EVENTS_TABLE} "
                         "WHERE rowid > ? ORDER BY rowid", (after,))

    def op_ids(self, after: int) -> Iterator[OpIdRow]:
        return self._all(f"SELECT namespace, op_id, event_index FROM {OP_IDS} WHERE event_index > ? "
                         "ORDER BY event_index, namespace, op_id", (after,))

    def keys(self) -> Iterator[KeyRow]:
        return self._all(f"SELECT cell_id, life, key FROM {KEYS} ORDER BY cell_id", ())

    def close(self) -> None:
        self.conn.close()


class PgSnapshot:
    """One ``REPEATABLE READ`` read-only transaction on a store's schema."""

    source = "postgresql"

    def __init__(self, conninfo: dict[str, Any], schema: str) -> None:
        import psycopg

        self.schema = schema
        self.conn = psycopg.connect(**conninfo)
        self.conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        self.conn.read_only = True
        self.last_index = int(self._one(f"SELECT COALESCE(MAX(notification_id), 0) FROM {self._t(PG_EVENTS)}"))
        found = self.conn.execute("SELECT to_regclass(%s)", (f'"{schema}".{META}',)).fetchone()
        meta = dict(self.conn.execute(f"SELECT name, value FROM {self._t(META)}").fetchall()) if found and found[0] \
            else {}
        self.key_edition, self.since = _edition(meta, self.last_index)

    def _t(self, table: str) -> str:
        return f'"{self.schema}".{table}'

    def _one(self, sql: str) -> Any:
        row = self.conn.execute(sql).fetchone()
        return None if row is None else row[0]

    def _stream(self, sql: str, params: tuple[Any, ...]) -> Iterator[Any]:
        with self.conn.cursor(name=f"pmem_export_{id(sql)}") as c:
            c.itersize = FETCH
            c.execute(sql, params)
            yield from c

    def events(self, after: int) -> Iterator[EventRow]:
        sql = (f"SELECT notification_id, translate(originator_id::text, '-', ''), originator_version, topic, state "
               f"FROM {self._t(PG_EVENTS)} WHERE notification_id > %s ORDER BY notification_id")
        return self._stream(sql, (after,))

    def op_ids(self, after: int) -> Iterator[OpIdRow]:
        return self._stream(f"SELECT namespace, op_id, event_index FROM {self._t(OP_IDS)} WHERE event_index > %s "
                            "ORDER BY event_index, namespace, op_id", (after,))

    def keys(self) -> Iterator[KeyRow]:
        return self._stream(f"SELECT cell_id, life, key FROM {self._t(KEYS)} ORDER BY cell_id", ())

    def close(self) -> None:
        self.conn.rollback()
        self.conn.close()


class SqliteSink:
    """One ``BEGIN IMMEDIATE`` transaction on a store file (the write lock from the start)."""

    def __init__(self, path: str, synchronous: str = "FULL") -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, timeout=60)
        self.conn.execute(f"PRAGMA synchronous={synchronous}")
        self.conn.execute("BEGIN IMMEDIATE")
        found = self.conn.execute(f"SELECT (SELECT COUNT(*) FROM (SELECT 1 FROM {EVENTS_TABLE} LIMIT 1)) + "
                                  f"(SELECT COUNT(*) FROM (SELECT 1 FROM {OP_IDS} LIMIT 1)) + "
                                  f"(SELECT COUNT(*) FROM (SELECT 1 FROM {KEYS} LIMIT 1))").fetchone()[0]
        if found:
            self.rollback()
            raise TargetNotEmpty(f"cannot import into {path}: the store is not empty (import needs a new store)",
                                 field="db")

    def events(self, rows: Iterable[EventRow]) -> None:
        self.conn.executemany(f"INSERT INTO {EVENTS_TABLE} (rowid, originator_id, originator_version, topic, state) "
                              "VALUES (?,?,?,?,?)", rows)

    def op_ids(self, rows: Iterable[OpIdRow]) -> None:
        self.conn.executemany(f"INSERT INTO {OP_IDS} VALUES (?,?,?)", rows)

    def keys(self, rows: Iterable[KeyRow]) -> None:
        self.conn.executemany(f"INSERT INTO {KEYS} VALUES (?,?,?)", rows)

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

        self.schema = schema
        self.conn = psycopg.connect(**conninfo)
        self.conn.execute(f"LOCK TABLE {self._t(PG_EVENTS)} IN EXCLUSIVE MODE")
        found = self.conn.execute(f"SELECT EXISTS (SELECT 1 FROM {self._t(PG_EVENTS)}) OR "
                                  f"EXISTS (SELECT 1 FROM {self._t(OP_IDS)}) OR "
                                  f"EXISTS (SELECT 1 FROM {self._t(KEYS)})").fetchone()
        if found and found[0]:
            self.rollback()
            raise TargetNotEmpty(f"cannot import into {label}: the store is not empty (import needs a new store)",
                                 field="db")

    def _t(self, table: str) -> str:
        return f'"{self.schema}".{table}'

    def _copy(self, table: str, columns: str, types: list[str], rows: Iterable[tuple[Any, ...]]) -> None:
        with self.conn.cursor() as c, c.copy(f"COPY {self._t(table)} ({columns}) FROM STDIN (FORMAT BINARY)") as cp:
            cp.set_types(types)
            for row in rows:
                cp.write_row(row)

    def events(self, rows: Iterable[tuple[Any, ...]]) -> None:
        self._copy(PG_EVENTS, "notification_id, originator_id, originator_version, topic, state",
                   ["int8", "uuid", "int8", "text", "bytea"], rows)

    def op_ids(self, rows: Iterable[OpIdRow]) -> None:
        self._copy(OP_IDS, "namespace, op_id, event_index", ["text", "text", "int8"], rows)

    def keys(self, rows: Iterable[KeyRow]) -> None:
        self._copy(KEYS, "cell_id, life, key", ["text", "int8", "bytea"], rows)

    def meta(self, key_edition: int, since: int | None) -> None:
        self.conn.execute(f"CREATE TABLE IF NOT EXISTS {self._t(META)} (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
        self.conn.execute(f"DELETE FROM {self._t(META)} WHERE name IN ('key_edition', 'key_edition_since')")
        with self.conn.cursor() as c:
            c.executemany(f"INSERT INTO {self._t(META)} VALUES (%s, %s)", _meta_rows(key_edition, since))

    def commit(self) -> None:
        self.conn.commit()
        self.conn.close()

    def rollback(self) -> None:
        self.conn.rollback()
        self.conn.close()


def _meta_rows(key_edition: int, since: int | None) -> list[tuple[str, str]]:
    rows = [("key_edition", str(key_edition))]
    return rows if since is None else [*rows, ("key_edition_since", str(since))]
