"""The event log's SQL, written once: its tables and columns, and every query that reads or writes the
events, the op ids, the data keys and the compact cell state, on SQLite and on PostgreSQL.

A query is a method of :class:`LogSql`, written with ``?`` placeholders over the common subset of both
dialects (``ON CONFLICT``, ``WITH RECURSIVE``); what differs lives in a small dialect object, in the
style of the projections' :mod:`pmem.adapters.storage.projection_db`:

- the events table, its event-index column and the cell id as hex (eventsourcing's tables: SQLite's
  ``stored_events`` numbered by ``rowid`` with text ids, PostgreSQL's ``pmem_events`` numbered by
  ``notification_id`` with ``uuid`` ids);
- a list of values in a query (``IN (?, ...)`` against ``= ANY(?)``) and a table of rows (``VALUES``
  against ``unnest`` of one array per column), with the bulk insert each is fastest with;
- the column types of the tables this module creates.

The store's recorders (:mod:`.log_access`, :mod:`.sqlite_log`, :mod:`.pg_log`), the read side before
the log is opened (:mod:`.stored_log`), export and import (:mod:`.portable_sql`), ``pmem doctor`` and
the rebuild all take their statements from here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any

SQLITE_EVENTS = "stored_events"  # eventsourcing's SQLite recorder's table
PG_EVENTS = "pmem_events"  # eventsourcing's PostgreSQL table, named after the application (EventLog.name)
OP_IDS, KEYS, CELLS, CHAIN, STATE_AT = "pmem_op_ids", "pmem_keys", "pmem_cells", "pmem_chain", "pmem_state_at"
EVENT_COLUMNS = ("originator_id", "originator_version", "topic", "state")  # eventsourcing's, in its order
OP_ID_COLUMNS = ("namespace", "op_id", "event_index")
KEY_COLUMNS = ("cell_id", "life", "key")
CELL_COLUMNS = ("cell_id", "namespace", "revision", "state")
CHAIN_COLUMNS = ("cell_id", "vid", "value", "trust", "below")
# The rows of a range of cells read by a scan of the table (SQLite, ``NOT INDEXED``) in storage order,
# far cheaper per row than following the (cell, revision) index; past SCAN_RANGES ranges a log read in
# ranges would be scanned once per range, and the index is cheaper (docs/projections.md has the figures).
SCAN_RANGES = 16


class SqliteDialect:
    """SQLite: ``?`` as written, lists as ``IN``, row tables as ``VALUES``, bulk writes by ``executemany``."""

    name = "sqlite"
    events = SQLITE_EVENTS
    index = "rowid"
    chunk = 500  # values bound in one list (SQLite binds at most 32,766 parameters)
    rows_chunk = 200  # rows of a VALUES table: each is a term of a compound SELECT, of which SQLite allows 500
    types = {"text": "TEXT", "int": "INTEGER", "blob": "BLOB"}
    clustered = " WITHOUT ROWID"

    def cell(self, alias: str = "") -> str:
        return f"{alias}originator_id"

    def table(self, name: str) -> str:
        return name

    def q(self, sql: str) -> str:
        return sql

    def uuid(self) -> str:
        return "?"

    def any(self, column: str, n: int, kind: str) -> str:
        return f"{column} IN ({','.join('?' * n)})"

    def any_params(self, values: Sequence[Any]) -> list[Any]:
        return list(values)

    def rows(self, kinds: Sequence[str], n: int, extra: str = "") -> str:
        """A table of ``n`` rows of ``kinds`` columns (``extra``: constant columns after the first two)."""
        one = ",".join(["?"] * len(kinds))
        if extra:
            first, rest = ",".join(["?"] * 2), ",".join(["?"] * (len(kinds) - 2))
            one = f"{first},{extra},{rest}"
        return f"VALUES {','.join([f'({one})'] * n)}"

    def rows_params(self, rows: Sequence[Sequence[Any]]) -> list[Any]:
        return [x for row in rows for x in row]

    def insert(self, c: Any, head: str, kinds: Sequence[str], rows: Sequence[Sequence[Any]], tail: str = "") -> None:
        """``head`` (``INSERT INTO t``) of ``rows``, then ``tail`` (an ``ON CONFLICT`` clause)."""
        if rows:
            c.executemany(f"{head} VALUES ({','.join('?' * len(kinds))}){tail}", rows)


class PgDialect:
    """PostgreSQL: ``?`` translated to ``%s``, lists as ``= ANY``, row tables and bulk writes as ``unnest``
    of one array per column; every table in the store's schema."""

    name = "postgresql"
    events = PG_EVENTS
    index = "notification_id"
    chunk = None
    rows_chunk = None
    types = {"text": "text", "int": "bigint", "blob": "bytea"}
    clustered = ""
    _arrays = {"text": "text[]", "int": "bigint[]", "blob": "bytea[]", "uuid": "uuid[]"}

    def __init__(self, schema: str) -> None:
        self.schema = schema
        self.events = self.table(PG_EVENTS)

    def cell(self, alias: str = "") -> str:
        return f"translate({alias}originator_id::text, '-', '')"

    def table(self, name: str) -> str:
        return f'"{self.schema}".{name}'

    def q(self, sql: str) -> str:
        return _translated(sql)

    def uuid(self) -> str:
        return "?::uuid"

    def any(self, column: str, n: int, kind: str) -> str:
        return f"{column} = ANY(?::{self._arrays[kind]})"

    def any_params(self, values: Sequence[Any]) -> list[Any]:
        return [list(values)]

    def rows(self, kinds: Sequence[str], n: int, extra: str = "") -> str:
        arrays = [f"?::{self._arrays[k]}" for k in kinds]
        if not extra:
            return f"SELECT * FROM unnest({', '.join(arrays)})"
        names = [f"c{i}" for i in range(len(kinds))]
        return (f"SELECT {', '.join([*names[:2], extra, *names[2:]])} FROM unnest({', '.join(arrays)}) "
                f"AS s({', '.join(names)})")

    def rows_params(self, rows: Sequence[Sequence[Any]]) -> list[Any]:
        return [list(col) for col in zip(*rows, strict=True)] if rows else []

    def insert(self, c: Any, head: str, kinds: Sequence[str], rows: Sequence[Sequence[Any]], tail: str = "") -> None:
        if rows:
            c.execute(self.q(f"{head} {self.rows(kinds, len(rows))}{tail}"), self.rows_params(rows))


@cache
def _translated(sql: str) -> str:
    from pmem.adapters.storage.pg_db import translate  # (imports psycopg: only where PostgreSQL is used)

    return translate(sql)


Dialect = SqliteDialect | PgDialect


def chunks(d: Dialect, values: Sequence[Any], size: int | None = None) -> Iterable[Sequence[Any]]:
    """``values`` in the pieces one statement of ``d`` binds (one piece on PostgreSQL)."""
    step = size or d.chunk
    if not values:
        return []
    if step is None:
        return [values]
    return (values[i:i + step] for i in range(0, len(values), step))


class _Tables:
    """The tables of the log in one dialect (qualified with the schema on PostgreSQL)."""

    def __init__(self, d: Dialect) -> None:
        self.d = d
        self.op_ids, self.keys = d.table(OP_IDS), d.table(KEYS)
        self.cells, self.chain, self.state_at = d.table(CELLS), d.table(CHAIN), d.table(STATE_AT)


class LogSql(_Tables):
    """Every statement of the log in one dialect, by concern: ``log`` (the events), ``ids`` (op ids and
    data keys) and ``state`` (the compact cell state)."""

    def __init__(self, d: Dialect) -> None:
        super().__init__(d)
        self.log, self.ids, self.state = EventQueries(d), KeyQueries(d), StateQueries(d)

    # -- the tables this module creates (the events table is the library's) --------------------------
    def create_statements(self) -> list[str]:
        t, k = self.d.types, self.d.clustered
        return [
            f"CREATE TABLE IF NOT EXISTS {self.op_ids} (namespace {t['text']} NOT NULL, op_id {t['text']} NOT NULL, "
            f"event_index {t['int']} NOT NULL, PRIMARY KEY (namespace, op_id)){k}",
            f"CREATE TABLE IF NOT EXISTS {self.keys} (cell_id {t['text']} PRIMARY KEY, life {t['int']} NOT NULL, "
            f"key {t['blob']} NOT NULL){k}",
            f"CREATE TABLE IF NOT EXISTS {self.cells} (cell_id {t['text']} PRIMARY KEY, namespace {t['text']} "
            f"NOT NULL, revision {t['int']} NOT NULL, state {t['blob']} NOT NULL){k}",
            f"CREATE TABLE IF NOT EXISTS {self.chain} (cell_id {t['text']} NOT NULL, vid {t['int']} NOT NULL, "
            f"value {t['text']} NOT NULL, trust {t['int']} NOT NULL, below {t['int']}, PRIMARY KEY (cell_id, vid)){k}",
            f"CREATE TABLE IF NOT EXISTS {self.state_at} (id {t['int']} PRIMARY KEY CHECK (id = 0), "
            f"position {t['int']} NOT NULL)",
        ]


class EventQueries(_Tables):
    """The statements of the events table."""

    def _row(self, alias: str = "") -> str:
        """The columns of a raw row: (event index, cell id hex, revision, topic, state)."""
        d = self.d
        return f"{alias}{d.index}, {d.cell(alias)}, {alias}originator_version, {alias}topic, {alias}state"

    def last_index(self) -> str:
        return f"SELECT COALESCE(MAX({self.d.index}), 0) FROM {self.d.events}"

    def index_bounds(self) -> str:
        """(count, first, last) of the event indices."""
        i = self.d.index
        return f"SELECT COUNT(*), COALESCE(MIN({i}), 0), COALESCE(MAX({i}), 0) FROM {self.d.events}"

    def first_missing(self) -> str:
        """The first index missing below the last (``?``), one past a present one (for a
        :class:`~pmem.adapters.storage.projection_db.ProjectionDb`, which binds ``?`` itself)."""
        i, t = self.d.index, self.d.events
        return (f"SELECT e.{i} + 1 FROM {t} e WHERE e.{i} < ? AND NOT EXISTS (SELECT 1 FROM {t} n "
                f"WHERE n.{i} = e.{i} + 1) ORDER BY e.{i} LIMIT 1")

    def rows(self, start: int, stop: int | None, limit: int | None) -> tuple[str, list[Any]]:
        """Raw rows with ``start <= index <= stop`` (None: to the end), in index order, ``limit`` at most."""
        i = self.d.index
        sql, params = f"SELECT {self._row()} FROM {self.d.events} WHERE {i} >= ?", [start]
        if stop is not None:
            sql += f" AND {i} <= ?"
            params.append(stop)
        sql += f" ORDER BY {i}"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return self.d.q(sql), params

    def rows_of(self, cells: Sequence[str], upto: int | None) -> tuple[str, list[Any]]:
        """The raw rows of ``cells`` (ids in hex; at most a chunk), each cell's in revision order."""
        d = self.d
        sql = f"SELECT {self._row()} FROM {d.events} WHERE {d.any('originator_id', len(cells), 'uuid')}"
        params = d.any_params(cells)
        if upto is not None:
            sql += f" AND {d.index} <= ?"
            params.append(upto)
        return d.q(sql + " ORDER BY originator_id, originator_version"), params

    def rows_after(self, cells: Sequence[tuple[str, int]], upto: int) -> tuple[str, list[Any]]:
        """The raw rows of each ``(cell id hex, revision)`` after that revision, index ``<= upto``."""
        d = self.d
        sql = (f"WITH w(id, v) AS ({d.rows(('uuid', 'int'), len(cells))}) SELECT {self._row('e.')} FROM w "
               f"JOIN {d.events} e ON e.originator_id = w.id AND e.originator_version > w.v "
               f"WHERE e.{d.index} <= ? ORDER BY e.originator_id, e.originator_version")
        return d.q(sql), [*d.rows_params(cells), upto]

    def cells_at(self, indices: Sequence[int]) -> tuple[str, list[Any]]:
        """(index, cell id hex) of the events at ``indices`` (at most a chunk)."""
        d = self.d
        return d.q(f"SELECT {d.index}, {d.cell()} FROM {d.events} WHERE {d.any(d.index, len(indices), 'int')}"
                   ), d.any_params(indices)

    def range_rows(self, cells: tuple[str, str | None], stop: int, ranges: int) -> tuple[str, tuple[Any, ...]]:
        """The raw rows with index ``<= stop`` of the cells in ``[lo, hi)``, each cell's in revision order,
        for a log read in ``ranges`` ranges: by a scan of the table in index order up to
        :data:`SCAN_RANGES` ranges, else through the (cell, revision) index (SQLite: the rebuild's reads)."""
        lo, hi = cells
        scan = ranges <= SCAN_RANGES and self.d.name == "sqlite"
        sql = (f"SELECT {self._row()} FROM {self.d.events}{' NOT INDEXED' if scan else ''} "
               f"WHERE originator_id >= ? AND {self.d.index} <= ?")
        if hi is not None:
            sql += " AND originator_id < ?"
        sql += f" ORDER BY {self.d.index}" if scan else " ORDER BY originator_id, originator_version"
        return self.d.q(sql), ((lo, stop) if hi is None else (lo, stop, hi))

    def scrub(self) -> str:
        """Rewrite one stored event's state: (state, cell id hex, revision)."""
        return self.d.q(f"UPDATE {self.d.events} SET state = ? WHERE originator_id = {self.d.uuid()} "
                        "AND originator_version = ?")

    def insert_numbered(self, n: int) -> tuple[str, list[str]]:
        """PostgreSQL's insert of ``n`` rows with the indices it numbers itself (the kinds of its arrays)."""
        kinds = ["uuid", "int", "text", "blob", "int"]
        return self.d.q(f"INSERT INTO {self.d.events} ({', '.join(EVENT_COLUMNS)}, {self.d.index}) "
                        f"{self.d.rows(kinds, n)}"), kinds

    def verbatim_columns(self) -> str:
        """The columns an import writes, the event index first."""
        return f"{self.d.index}, {', '.join(EVENT_COLUMNS)}"

    def nonempty(self) -> str:
        """Whether the log, the op ids or the data keys hold a row (an import needs none)."""
        return ("SELECT " + " + ".join(f"(SELECT COUNT(*) FROM (SELECT 1 FROM {t} LIMIT 1) AS x)"
                                      for t in (self.d.events, self.op_ids, self.keys)))


class KeyQueries(_Tables):
    """The statements of the op-id and data-key tables."""

    def op_ids_of(self, n: int) -> str:
        """(op id, event index) of ``n`` op ids of one namespace (``?`` first)."""
        return self.d.q(f"SELECT op_id, event_index FROM {self.op_ids} WHERE namespace = ? AND "
                        f"{self.d.any('op_id', n, 'text')}")

    def op_ids_after(self) -> str:
        return self.d.q(f"SELECT {', '.join(OP_ID_COLUMNS)} FROM {self.op_ids} WHERE event_index > ? "
                        "ORDER BY event_index, namespace, op_id")

    def dangling_op_ids(self) -> str:
        return (f"SELECT count(*) FROM {self.op_ids} o LEFT JOIN {self.d.events} e ON e.{self.d.index} = "
                f"o.event_index WHERE e.{self.d.index} IS NULL")

    def keys_of(self, n: int) -> str:
        return self.d.q(f"SELECT {', '.join(KEY_COLUMNS)} FROM {self.keys} WHERE {self.d.any('cell_id', n, 'text')}")

    def keys_in(self, lo: str, hi: str | None) -> tuple[str, tuple[str, ...]]:
        """The keys of the cells in ``[lo, hi)`` (``hi`` None: no upper bound)."""
        sql = f"SELECT {', '.join(KEY_COLUMNS)} FROM {self.keys} WHERE cell_id >= ?"
        return (self.d.q(sql), (lo,)) if hi is None else (self.d.q(sql + " AND cell_id < ?"), (lo, hi))

    def all_keys(self) -> str:
        return f"SELECT {', '.join(KEY_COLUMNS)} FROM {self.keys} ORDER BY cell_id"

    def delete_keys(self, n: int) -> str:
        return self.d.q(f"DELETE FROM {self.keys} WHERE {self.d.any('cell_id', n, 'text')}")


class StateQueries(_Tables):
    """The statements of the compact cell state's tables (:mod:`.cell_state`)."""

    def states_of(self, n: int) -> str:
        return self.d.q(f"SELECT cell_id, revision, state FROM {self.cells} WHERE {self.d.any('cell_id', n, 'text')}")

    def state_counts(self) -> str:
        return f"SELECT count(*), count(DISTINCT namespace) FROM {self.cells}"

    def upsert_state(self) -> str:
        return (" ON CONFLICT (cell_id) DO UPDATE SET namespace = excluded.namespace, revision = excluded.revision, "
                "state = excluded.state")

    def upsert_chain(self) -> str:
        return (" ON CONFLICT (cell_id, vid) DO UPDATE SET value = excluded.value, trust = excluded.trust, "
                "below = excluded.below")

    def unchain(self) -> str:
        return self.d.q(f"DELETE FROM {self.chain} WHERE cell_id = ? AND vid = ?")

    def clear_chains(self, n: int) -> str:
        return self.d.q(f"DELETE FROM {self.chain} WHERE {self.d.any('cell_id', n, 'text')}")

    def chain_walk(self, n: int) -> str:
        """Up to ``k`` chain rows from each of ``n`` ``(cell id hex, version id, k)``, following ``below``."""
        d = self.d
        return d.q(f"WITH RECURSIVE w(cell_id, vid, n, k) AS ({d.rows(('text', 'int', 'int'), n, extra='1')} "
                   f"UNION ALL SELECT w.cell_id, c.below, w.n + 1, w.k FROM w JOIN {self.chain} c "
                   "ON c.cell_id = w.cell_id AND c.vid = w.vid WHERE w.n < w.k AND c.below IS NOT NULL) "
                   f"SELECT c.cell_id, c.vid, c.value, c.trust, c.below FROM w "
                   f"JOIN {self.chain} c ON c.cell_id = w.cell_id AND c.vid = w.vid")

    def state_position(self) -> str:
        return f"SELECT position FROM {self.state_at}"

    def advance(self) -> str:
        """Move the state's position to ``?`` only from ``?`` (the batch's first index less one)."""
        return self.d.q(f"UPDATE {self.state_at} SET position = ? WHERE position = ?")

    def set_position(self) -> str:
        return self.d.q(f"INSERT INTO {self.state_at} VALUES (0, ?) ON CONFLICT (id) DO UPDATE "
                        "SET position = excluded.position")
