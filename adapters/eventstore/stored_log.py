"""The log as the read side sees it before eventsourcing is loaded: plain SQL on the store's file.

``pmem get`` (and ``frontier``, ``history``, ``log``, ``stats``) only read the projections and the
raw event rows; importing ``eventsourcing`` and opening its application was most of their start-up.
:class:`LazyLog` answers ``last_index()`` and raw rows with the projection connection (the same
file), and opens the :class:`~pmem.adapters.eventstore.eventlog.EventLog` only when events must be decoded: a
projection that lags the log catches up through it, so reads stay exact.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any
from uuid import UUID

from pmem.adapters.eventstore.codec import OP_BY_TOPIC, decode_event, decode_fields, recorded_at
from pmem.adapters.eventstore.log_sql import SCAN_RANGES, SQLITE_EVENTS, STATE_AT, LogSql, SqliteDialect
from pmem.adapters.eventstore.sealing import Keyring
from pmem.domain.errors import StoreUnavailable

EVENTS_TABLE = SQLITE_EVENTS  # (a test checks the name)
RawRow = tuple[int, str, int, str, bytes]  # (event index, cell id hex, cell revision, topic, state)
CellRange = tuple[str, "str | None"]  # [lo, hi) of cell ids (hex); hi None: no upper bound
SQL = LogSql(SqliteDialect())
__all__ = ["SCAN_RANGES", "LazyLog", "event_dict", "range_keys", "range_rows", "read_only", "select_keys"]


def read_only(path: str) -> sqlite3.Connection:
    """A read-only connection to the store file. It does not memory-map the file: a rebuild's scan
    touches every page, and mapped pages count in the process's RSS (the whole log's size, whatever
    the range read); through SQLite's page cache the memory stays bounded, at no cost measured in
    speed (docs/decisions.md, "Read-only connections to the store do not memory-map it")."""
    return sqlite3.connect(f"{Path(path).as_uri()}?mode=ro", uri=True)


def range_rows(conn: sqlite3.Connection, table: str, cells: CellRange, stop: int, ranges: int) -> list[RawRow]:
    """The stored rows with index ``<= stop`` of the cells in the range, each cell's in revision order,
    for a log read in ``ranges`` ranges (:meth:`.log_sql.LogSql.range_rows`), read on ``conn``. (``table``:
    the events table, :data:`EVENTS_TABLE`.)"""
    assert table == EVENTS_TABLE
    return conn.execute(*SQL.log.range_rows(cells, stop, ranges)).fetchall()


def has_log(conn: sqlite3.Connection) -> bool:
    """Whether this file already holds a P-Mem log (else the EventLog must create it)."""
    try:
        found = conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?",
                             (SQLITE_EVENTS,)).fetchone()
    except sqlite3.Error:
        return False
    return found is not None


class LazyLog:
    """What projections and plain reads need of the log; the EventLog opens on first real need."""

    def __init__(self, conn: sqlite3.Connection, open_log: Callable[[], Any], label: str = "") -> None:
        self.conn = conn
        self._open_log = open_log
        self.keys = Keyring(label, self._select_keys)  # the EventLog's ``keys`` share its cache (one label)

    def _select_keys(self, cells: list[str]) -> dict[str, tuple[int, bytes]]:
        return select_keys(self.conn, cells)

    def load_keys(self, cells: CellRange) -> None:
        """Cache the data keys of a range of cells (a rebuild reads the range next)."""
        self.keys.refresh_range(cells, range_keys(self.conn, cells))

    def last_index(self) -> int:
        return int(self._query(SQL.log.last_index(), ())[0][0])

    def state_counts(self) -> tuple[int, int]:
        """(cells, namespaces) that hold events, from the compact cell state; a store whose state does
        not reflect its whole log opens the EventLog, which rebuilds it."""
        if self._query("SELECT count(*) FROM sqlite_master WHERE name=?", (STATE_AT,))[0][0]:
            position = self._query(SQL.state.state_position(), ())
            if position and position[0][0] == self.last_index():
                cells, namespaces = self._query(SQL.state.state_counts(), ())[0]
                return int(cells), int(namespaces)
        return self._open_log().state_counts()  # type: ignore[no-any-return]

    def rows(self, start: int, stop: int | None, limit: int) -> list[RawRow]:
        """Raw rows with ``start <= index <= stop`` (``stop`` None: to the end), at most ``limit``."""
        return self._query(*SQL.log.rows(start, stop, limit))

    # -- what needs decoded events: the EventLog --------------------------------------------
    def indexed_events(self, start: int = 1, stop: int | None = None) -> Iterator[Any]:
        return self._open_log().indexed_events(start, stop)  # type: ignore[no-any-return]

    def rows_of_cells(self, cells: CellRange, stop: int, ranges: int) -> list[RawRow]:
        """The rows of the cells in the range ``cells`` with index ``<= stop`` (one of ``ranges``), read
        through a read-only connection of its own."""
        path = self.conn.execute("PRAGMA database_list").fetchone()[2]
        try:
            if not path:  # an in-memory store: its one connection
                return range_rows(self.conn, EVENTS_TABLE, cells, stop, ranges)
            conn = read_only(path)
            try:
                return range_rows(conn, EVENTS_TABLE, cells, stop, ranges)
            finally:
                conn.close()
        except sqlite3.Error as e:
            raise StoreUnavailable(f"cannot read the log in {path or 'memory'}: {e}") from e

    def cell_events(self, ids: Sequence[UUID], upto: int | None = None) -> Any:
        return self._open_log().cell_events(ids, upto)

    def _query(self, sql: str, params: Sequence[Any]) -> list[Any]:
        try:
            return self.conn.execute(sql, params).fetchall()
        except sqlite3.Error as e:
            raise StoreUnavailable(f"cannot read the log: {e}") from e


def select_keys(conn: sqlite3.Connection, cells: list[str]) -> dict[str, tuple[int, bytes]]:
    """The data keys of these cells (none in a file written before sealing: it has no key table)."""
    return _keys(conn, SQL.ids.keys_of(len(cells)), tuple(cells))


def range_keys(conn: sqlite3.Connection, cells: CellRange) -> dict[str, tuple[int, bytes]]:
    """The data keys of the cells in a range of cell ids."""
    return _keys(conn, *SQL.ids.keys_in(*cells))


def _keys(conn: sqlite3.Connection, sql: str, params: tuple[str, ...]) -> dict[str, tuple[int, bytes]]:
    try:
        rows = conn.execute(sql, params).fetchall()
    except sqlite3.OperationalError as e:
        if "no such table" in str(e):
            return {}
        raise StoreUnavailable(f"cannot read the data keys: {e}") from e
    return {r[0]: (int(r[1]), bytes(r[2])) for r in rows}


def event_dict(row: RawRow, keys: Any = None) -> dict[str, Any]:
    """The plain dict ``pmem log`` prints for a raw row: index, key, op, value, applied, every other
    field that is set, and ``recorded_at``. A row stored at an older class version is upcast by the
    codec, a sealed one opened with ``keys``; one with an unknown topic goes through the full decoder
    (the library's ``TopicError``)."""
    index, cid, revision, topic, state = row
    op = OP_BY_TOPIC.get(topic)
    if op is None:
        return object_dict(index, decode_event(topic, state, cid, revision, keys))  # the library's TopicError
    f = decode_fields(topic, state, cid, revision, keys)
    d: dict[str, Any] = {"event_index": index, "key": f["key"], "op": op, "value": f.get("value"),
                         "applied": op != "noop"}
    for name, v in f.items():
        if name in ("timestamp", "value") or v is None:
            continue
        d[name] = v
    d["recorded_at"] = recorded_at(f).isoformat()
    return d


def object_dict(index: int, e: Any) -> dict[str, Any]:
    """The same dict from a decoded event object."""
    d = {"event_index": index, "key": e.key, "op": e.OP, "value": getattr(e, "value", None),
         "applied": e.applied}
    for name, v in vars(e).items():
        if name in ("originator_id", "originator_version", "timestamp", "value") or v is None:
            continue
        d[name] = v
    d["recorded_at"] = e.timestamp.isoformat()
    return d
