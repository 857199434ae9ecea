"""The projections' database on PostgreSQL: the :class:`pmem.adapters.storage.projection_db.ProjectionDb` interface
over one psycopg connection, with the store's schema first on its search path.

The shared SQL's ``?`` and ``:name`` placeholders become psycopg's ``%s`` and ``%(name)s``
(translated once per statement and cached). Write transactions take a transaction-scoped advisory lock
named after what they write, the counterpart of SQLite's single write lock.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql as pgsql

from pmem.adapters.storage.projection_db import Params, create_table

_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


def translate(statement: str) -> str:
    """``?`` -> ``%s``, ``:name`` -> ``%(name)s``, a literal ``%`` doubled (casts ``::`` untouched)."""
    return _NAMED.sub(r"%(\1)s", statement.replace("%", "%%").replace("?", "%s"))


class PgDb:
    """One autocommit psycopg connection; transactions are explicit."""

    errors: tuple[type[BaseException], ...] = (psycopg.Error,)
    int_type = "BIGINT"
    clustered = ""

    def __init__(self, conninfo: dict[str, Any], schema: str, *, fast_rebuild: bool = False) -> None:
        self.schema = schema
        self.fast_rebuild = fast_rebuild
        self.raw = psycopg.connect(**conninfo, autocommit=True)
        self.raw.execute(pgsql.SQL("SET search_path TO {}").format(pgsql.Identifier(schema)))
        self._sql: dict[str, str] = {}

    def _q(self, statement: str) -> str:
        q = self._sql.get(statement)
        if q is None:
            q = self._sql[statement] = translate(statement)
        return q

    def execute(self, sql: str, params: Params = ()) -> psycopg.Cursor[Any]:
        if not params:
            return self.raw.execute(sql.encode())  # no placeholders to bind: the statement as written
        return self.raw.execute(self._q(sql).encode(), params)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> psycopg.Cursor[Any]:
        cur = self.raw.cursor()
        cur.executemany(self._q(sql).encode(), rows)
        return cur

    @contextmanager
    def write(self, lock: str) -> Iterator[None]:
        """One transaction, serialised against every other writer of ``lock`` (in any process)."""
        with self.raw.transaction():
            self.raw.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"{self.schema}.{lock}",))
            yield

    def write_busy(self) -> bool:
        return False  # (the advisory lock is not looked at: a read that needs a fold waits for it)

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        with self.raw.transaction():
            self.raw.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield

    def ensure_table(self, table: str, columns: Mapping[str, type], pk: Sequence[str],
                     nullable: Iterable[str] = ()) -> None:
        self.execute(create_table(self, table, columns, pk, nullable))

    def names(self) -> set[str]:
        rows = self.raw.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %(s)s "
            "UNION ALL SELECT indexname FROM pg_indexes WHERE schemaname = %(s)s "
            "UNION ALL SELECT viewname FROM pg_views WHERE schemaname = %(s)s", {"s": self.schema})
        return {r[0] for r in rows}

    def views(self) -> set[str]:
        rows = self.raw.execute("SELECT viewname FROM pg_views WHERE schemaname = %(s)s", {"s": self.schema})
        return {r[0] for r in rows}

    def create_view(self, name: str, select: str) -> str:
        """PostgreSQL has no ``CREATE VIEW IF NOT EXISTS``; the callers hold the write lock."""
        return f"CREATE OR REPLACE VIEW {name} AS {select}"

    def upsert(self, table: str, columns: Sequence[str], pk: Sequence[str]) -> str:
        rest = [c for c in columns if c not in pk]
        action = (f"DO UPDATE SET {', '.join(f'{c} = EXCLUDED.{c}' for c in rest)}" if rest else "DO NOTHING")
        return (f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))}) "
                f"ON CONFLICT ({', '.join(pk)}) {action}")

    def close(self) -> None:
        self.raw.close()
