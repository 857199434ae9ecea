"""The PostgreSQL event log: eventsourcing's postgres persistence, extended for P-Mem like
:mod:`pmem.adapters.eventstore.sqlite_log` extends the SQLite one (same methods, same guarantees).

Selected with ``PERSISTENCE_MODULE=pmem.adapters.eventstore.pg_log:Factory``. On top of the stock recorder it
- inserts a batch with one ``INSERT ... SELECT FROM unnest(...)`` under the stock ``EXCLUSIVE`` table
  lock (readers are not blocked), and ``NOTIFY``s the channel the stock subscription listens on;
- numbers the events itself, ``max + 1 ...`` under that lock, so event indices have no gaps even
  when a transaction rolls back (a ``bigserial`` would skip the numbers it handed out). Every write,
  ``Application.save`` included, goes through this path, so the sequence is never used;
- records ``(namespace, op_id) -> event index`` in the same transaction, under a unique constraint;
- loads the events of many cells in one query, and one cell's events up to an event index;
- keeps the cells' data keys (``pmem_keys``, :mod:`.sealing`) in the same transactions as the events.
- keeps the compact cell state (``pmem_cells``, ``pmem_chain``: :mod:`.cell_state`) in them too.

A version conflict (another writer recorded the same cell version first) fails the whole
transaction with :class:`eventsourcing.persistence.IntegrityError`, as on SQLite.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from uuid import UUID

import psycopg
from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresFactory
from psycopg.rows import tuple_row
from psycopg.sql import SQL, Identifier

from pmem.adapters.eventstore.cell_state import StateWrites

Row = tuple[str, int, str, bytes]
KeyRow = tuple[str, int, bytes]
_HEX = "translate(originator_id::text, '-', '')"


class PmemPgRecorder(PostgresApplicationRecorder):
    """The application recorder plus op-id idempotency, gap-free indices and bulk cell loading."""

    def __init__(self, datastore: Any, *, events_table_name: str = "stored_events") -> None:
        super().__init__(datastore, events_table_name=events_table_name)
        schema = Identifier(self.datastore.schema)
        self.op_ids_table = SQL("{}.pmem_op_ids").format(schema)
        self.sql_create_statements.append(SQL(
            "CREATE TABLE IF NOT EXISTS {} (namespace text NOT NULL, op_id text NOT NULL, "
            "event_index bigint NOT NULL, PRIMARY KEY (namespace, op_id))").format(self.op_ids_table))
        self.keys_table = SQL("{}.pmem_keys").format(schema)
        self.sql_create_statements.append(SQL(
            "CREATE TABLE IF NOT EXISTS {} (cell_id text PRIMARY KEY, life bigint NOT NULL, key bytea NOT NULL)"
        ).format(self.keys_table))
        self.cells_table = SQL("{}.pmem_cells").format(schema)
        self.sql_create_statements.append(SQL(
            "CREATE TABLE IF NOT EXISTS {} (cell_id text PRIMARY KEY, namespace text NOT NULL, "
            "revision bigint NOT NULL, state bytea NOT NULL)").format(self.cells_table))
        self.chain_table = SQL("{}.pmem_chain").format(schema)
        self.sql_create_statements.append(SQL(
            "CREATE TABLE IF NOT EXISTS {} (cell_id text NOT NULL, vid bigint NOT NULL, value text NOT NULL, "
            "trust bigint NOT NULL, below bigint, PRIMARY KEY (cell_id, vid))"
        ).format(self.chain_table))
        self.table = SQL("{}.{}").format(schema, Identifier(self.events_table_name))
        self._local = threading.local()
        self.states = PgStates(self)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """One transaction around many :meth:`insert_rows`: the contract of
        :meth:`pmem.adapters.eventstore.sqlite_log.PmemRecorder.batch` (the table lock is taken first)."""
        with self._cursor(commit=True) as c:
            for statement in self.lock_table_statements:
                c.execute(statement)
            self._local.cursor = c
            try:
                yield
            finally:
                self._local.cursor = None

    @contextmanager
    def _cursor(self, *, commit: bool) -> Iterator[psycopg.Cursor[Any]]:
        """A tuple cursor in one transaction (rolled back unless ``commit``), or the cursor of this
        thread's open :meth:`batch`; library errors are translated to eventsourcing's persistence
        errors by the datastore."""
        open_cursor = getattr(self._local, "cursor", None)
        if open_cursor is not None:
            yield open_cursor
            return
        with self.datastore.get_connection() as conn, conn.transaction(force_rollback=not commit):
            yield conn.cursor(row_factory=tuple_row)

    # -- writing -------------------------------------------------------------
    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        rows = [(s.originator_id.hex if isinstance(s.originator_id, UUID) else str(s.originator_id),
                 s.originator_version, s.topic, s.state) for s in stored_events]
        if not rows:
            return []
        first = self.insert_rows(rows, [len(rows)], kwargs.get("op_ids", ()))
        return list(range(first, first + len(rows)))

    def insert_rows(self, rows: Iterable[Row], count: list[int], op_ids: Iterable[tuple[str, str, int]] = (),
                    keys: Iterable[KeyRow] = (), forgetting: Any = None,
                    states: Callable[[], StateWrites] | None = None) -> int:
        """Insert rows ``(originator_id_hex, version, topic, state)`` in one transaction; return the
        event index of the first (the rest follow consecutively). The contract of
        :meth:`pmem.adapters.eventstore.sqlite_log.PmemRecorder.insert_rows` (``forgetting``: its
        ``Forgetting``)."""
        batch = list(rows)  # decided and encoded before the table lock is taken
        with self._cursor(commit=True) as c:
            first = self._insert_locked(c, batch, op_ids)
            key_rows = list(keys)
            if key_rows:
                c.executemany(SQL("INSERT INTO {} VALUES (%s, %s, %s)").format(self.keys_table), key_rows)
            if forgetting is not None:
                c.execute(SQL("DELETE FROM {} WHERE cell_id = ANY(%s)").format(self.keys_table),
                          (list(forgetting.cells),))
                c.executemany(SQL("UPDATE {} SET state = %s WHERE originator_id = %s::uuid AND "
                                  "originator_version = %s").format(self.table), forgetting.scrub)
            if states is not None:
                self.states.write(c, states())
        return first

    def select_keys(self, cells: Sequence[str]) -> dict[str, tuple[int, bytes]]:
        """``cell id hex -> (life, key)`` of those of ``cells`` that have a data key."""
        with self._cursor(commit=False) as c:
            c.execute(SQL("SELECT cell_id, life, key FROM {} WHERE cell_id = ANY(%s)").format(self.keys_table),
                      (list(cells),))
            return {r[0]: (int(r[1]), bytes(r[2])) for r in c.fetchall()}

    def select_keys_range(self, cells: tuple[str, str | None]) -> dict[str, tuple[int, bytes]]:
        """The data keys of the cells in a range of cell ids."""
        lo, hi = cells
        sql = SQL("SELECT cell_id, life, key FROM {} WHERE cell_id >= %s").format(self.keys_table)
        params = [lo]
        if hi is not None:
            sql += SQL(" AND cell_id < %s")
            params.append(hi)
        with self._cursor(commit=False) as c:
            c.execute(sql, params)
            return {r[0]: (int(r[1]), bytes(r[2])) for r in c.fetchall()}

    def vacuum(self) -> None:
        """``VACUUM`` every table of the store's schema (after a forget: the dead row versions that
        held plaintext are pruned; docs/forgetting.md says what only ``VACUUM FULL`` guarantees)."""
        with self.datastore.get_connection() as conn:
            autocommit = conn.autocommit
            conn.autocommit = True
            try:
                c = conn.cursor(row_factory=tuple_row)
                tables = c.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s",
                                   (self.datastore.schema,)).fetchall()
                for (table,) in tables:
                    c.execute(SQL("VACUUM {}.{}").format(Identifier(self.datastore.schema), Identifier(table)))
            finally:
                conn.autocommit = autocommit

    def _insert_locked(self, c: Any, batch: list[Row], op_ids: Iterable[tuple[str, str, int]]) -> int:
        """Insert ``batch`` under the table lock with its op ids; the first event index."""
        for statement in self.lock_table_statements:
            c.execute(statement)
        c.execute(SQL("NOTIFY {}").format(Identifier(self.channel_name)))
        c.execute(SQL("SELECT COALESCE(MAX(notification_id), 0) FROM {}").format(self.table))
        first = int(c.fetchone()[0]) + 1
        if batch:
            ids, versions, topics, states = zip(*batch, strict=True)
            c.execute(SQL(
                "INSERT INTO {} (originator_id, originator_version, topic, state, notification_id) "
                "SELECT * FROM unnest(%s::uuid[], %s::bigint[], %s::text[], %s::bytea[], %s::bigint[])"
            ).format(self.table), (list(ids), list(versions), list(topics), list(states),
                                   list(range(first, first + len(batch)))))
        id_rows = [(ns, op_id, first + pos) for ns, op_id, pos in op_ids]
        if id_rows:
            namespaces, names, indices = zip(*id_rows, strict=True)
            c.execute(SQL("INSERT INTO {} SELECT * FROM unnest(%s::text[], %s::text[], %s::bigint[])")
                      .format(self.op_ids_table), (list(namespaces), list(names), list(indices)))
        return first

    # -- reads ---------------------------------------------------------------
    def select_cells(self, ids: Sequence[UUID], upto: int | None = None) -> dict[str, list[tuple[Any, ...]]]:
        """Rows ``(index, originator_id_hex, version, topic, state)`` per cell, in version order."""
        out: dict[str, list[tuple[Any, ...]]] = {}
        if not ids:
            return out
        sql = SQL("SELECT notification_id, " + _HEX + ", originator_version, topic, state FROM {} "
                  "WHERE originator_id = ANY(%s::uuid[])").format(self.table)
        params: list[Any] = [[i.hex for i in ids]]
        if upto is not None:
            sql += SQL(" AND notification_id <= %s")
            params.append(upto)
        with self._cursor(commit=False) as c:
            c.execute(sql + SQL(" ORDER BY originator_id, originator_version"), params)
            for row in c.fetchall():
                out.setdefault(row[1], []).append(row)
        return out

    def select_cells_after(self, cells: Sequence[tuple[str, int]], upto: int) -> dict[str, list[tuple[Any, ...]]]:
        """As :meth:`select_cells`, but of each ``(cell id hex, revision)`` only the rows after that
        revision (and with index ``<= upto``)."""
        out: dict[str, list[tuple[Any, ...]]] = {}
        if not cells:
            return out
        sql = SQL("SELECT e.notification_id, " + _HEX.replace("originator_id", "e.originator_id") +
                  ", e.originator_version, e.topic, e.state FROM {} e "
                  "JOIN unnest(%s::uuid[], %s::bigint[]) AS w(id, v) "
                  "ON e.originator_id = w.id AND e.originator_version > w.v "
                  "WHERE e.notification_id <= %s ORDER BY e.originator_id, e.originator_version").format(self.table)
        with self._cursor(commit=False) as c:
            c.execute(sql, [[h for h, _ in cells], [v for _, v in cells], upto])
            for row in c.fetchall():
                out.setdefault(row[1], []).append(row)
        return out

    def select_rows(self, start: int, stop: int | None, limit: int) -> list[tuple[Any, ...]]:
        """Rows ``(index, originator_id_hex, version, topic, state)`` with ``start <= index <= stop``."""
        sql = SQL("SELECT notification_id, " + _HEX + ", originator_version, topic, state FROM {} "
                  "WHERE notification_id >= %s").format(self.table)
        params: list[Any] = [start]
        if stop is not None:
            sql += SQL(" AND notification_id <= %s")
            params.append(stop)
        with self._cursor(commit=False) as c:
            c.execute(sql + SQL(" ORDER BY notification_id LIMIT %s"), [*params, limit])
            return c.fetchall()

    def cells_at(self, indices: Sequence[int]) -> list[tuple[int, str]]:
        """``(event index, cell id hex)`` of each of the events at ``indices`` that exists."""
        with self._cursor(commit=False) as c:
            c.execute(SQL("SELECT notification_id, " + _HEX + " FROM {} WHERE notification_id = ANY(%s)")
                      .format(self.table), (list(indices),))
            return [(int(i), str(h)) for i, h in c.fetchall()]

    def lookup_op_ids(self, namespace: str, op_ids: Sequence[str]) -> dict[str, int]:
        with self._cursor(commit=False) as c:
            c.execute(SQL("SELECT op_id, event_index FROM {} WHERE namespace = %s AND op_id = ANY(%s)")
                      .format(self.op_ids_table), (namespace, list(op_ids)))
            return {r[0]: int(r[1]) for r in c.fetchall()}

    def max_notification_id(self) -> int:
        with self._cursor(commit=False) as c:
            c.execute(SQL("SELECT COALESCE(MAX(notification_id), 0) FROM {}").format(self.table))
            return int(c.fetchone()[0])  # type: ignore[index]

    def integrity_check(self) -> str:
        """``ok``, or what is wrong: indices must run 1..N without a gap, every op id must name an
        event of its namespace (PostgreSQL checks its own pages; this checks P-Mem's invariants)."""
        with self._cursor(commit=False) as c:
            c.execute(SQL("SELECT count(*), COALESCE(MIN(notification_id), 1), COALESCE(MAX(notification_id), 0) "
                          "FROM {}").format(self.table))
            n, lo, hi = c.fetchone()  # type: ignore[misc]
            if (lo, hi) != (1, n):
                return f"event indices are not 1..{n}: they run {lo}..{hi}"
            c.execute(SQL("SELECT count(*) FROM {} o LEFT JOIN {} e ON e.notification_id = o.event_index "
                          "WHERE e.notification_id IS NULL").format(self.op_ids_table, self.table))
            dangling = int(c.fetchone()[0])  # type: ignore[index]
            return "ok" if dangling == 0 else f"{dangling} op ids name no event"


class Factory(PostgresFactory):
    """The persistence factory ``eventsourcing`` finds in this module."""

    application_recorder_class = PmemPgRecorder


class PgStates:
    """The compact cell state's tables (:mod:`.cell_state`), read and written through a recorder's
    transactions."""

    def __init__(self, recorder: Any) -> None:
        self.r = recorder

    def write(self, c: Any, w: StateWrites) -> None:
        """Write the compact cell state's changes (:mod:`.cell_state`) with cursor ``c``."""
        if w.cleared:
            c.execute(SQL("DELETE FROM {} WHERE cell_id = ANY(%s)").format(self.r.chain_table), (w.cleared,))
        if w.unchained:
            c.executemany(SQL("DELETE FROM {} WHERE cell_id = %s AND vid = %s").format(self.r.chain_table), w.unchained)
        if w.chain:
            c.executemany(SQL("INSERT INTO {} VALUES (%s, %s, %s, %s, %s) ON CONFLICT (cell_id, vid) DO UPDATE "
                              "SET value = EXCLUDED.value, trust = EXCLUDED.trust, "
                              "below = EXCLUDED.below").format(self.r.chain_table), w.chain)
        if w.states:
            ids, namespaces, revisions, blobs = zip(*w.states, strict=True)
            c.execute(SQL("INSERT INTO {} SELECT * FROM unnest(%s::text[], %s::text[], %s::bigint[], %s::bytea[]) "
                          "ON CONFLICT (cell_id) DO UPDATE SET namespace = EXCLUDED.namespace, "
                          "revision = EXCLUDED.revision, state = EXCLUDED.state").format(self.r.cells_table),
                      (list(ids), list(namespaces), list(revisions), list(blobs)))

    def save(self, w: StateWrites) -> None:
        """Write ``w`` in this thread's open batch, or a transaction of its own."""
        with self.r._cursor(commit=True) as c:
            self.write(c, w)

    def select(self, cells: Sequence[str]) -> dict[str, tuple[int, bytes]]:
        """``cell id hex -> (revision, compact state)`` of those of ``cells`` that have events."""
        with self.r._cursor(commit=False) as c:
            c.execute(SQL("SELECT cell_id, revision, state FROM {} WHERE cell_id = ANY(%s)").format(self.r.cells_table),
                      (list(cells),))
            return {r[0]: (int(r[1]), bytes(r[2])) for r in c.fetchall()}

    def chain(self, starts: Sequence[tuple[str, int, int]]) -> list[tuple[Any, ...]]:
        """The contract of :meth:`pmem.adapters.eventstore.sqlite_log.SqliteStates.chain`."""
        if not starts:
            return []
        ids, vids, ks = zip(*starts, strict=True)
        with self.r._cursor(commit=False) as c:
            c.execute(SQL("WITH RECURSIVE w(cell_id, vid, n, k) AS ("
                          "SELECT s.i, s.v, 1, s.k FROM unnest(%s::text[], %s::bigint[], %s::bigint[]) AS s(i, v, k) "
                          "UNION ALL SELECT w.cell_id, c.below, w.n + 1, w.k FROM w JOIN {} c "
                          "ON c.cell_id = w.cell_id AND c.vid = w.vid WHERE w.n < w.k AND c.below IS NOT NULL) "
                          "SELECT c.cell_id, c.vid, c.value, c.trust, c.below FROM w "
                          "JOIN {} c ON c.cell_id = w.cell_id AND c.vid = w.vid").format(self.r.chain_table,
                                                                                       self.r.chain_table),
                      (list(ids), list(vids), list(ks)))
            return list(c.fetchall())

    def counts(self) -> tuple[int, int]:
        """(cells, namespaces) that hold events."""
        with self.r._cursor(commit=False) as c:
            cells, namespaces = c.execute(SQL("SELECT count(*), count(DISTINCT namespace) FROM {}")
                                          .format(self.r.cells_table)).fetchall()[0]
            return int(cells), int(namespaces)


def is_pg_error(e: BaseException) -> bool:
    return isinstance(e, psycopg.Error)


class PgNotifications:
    """The NOTIFYs of :meth:`PmemPgRecorder.insert_rows`, heard on a connection of its own that
    LISTENs on the recorder's channel: the :class:`pmem.adapters.readmodels.follower.Notifications` source of
    ``pmem worker`` on PostgreSQL.

    This is the listen half of eventsourcing's ``PostgresSubscription`` (``LISTEN channel``, then
    ``conn.notifies(timeout=..., stop_after=1)``), without its iterator of events and without the
    ``ProjectionRunner`` on top. Both fit an eventsourcing ``TrackingRecorder`` view that records
    one event at a time; P-Mem's projections read the log themselves and commit a batch with
    their own position (:mod:`pmem.adapters.readmodels.tracked_projection`), the same transaction a reader
    catching up uses. The subscription would select every event a second time, only to be told
    that there are some. LISTEN is issued here, before the follower first reads the last index,
    so a NOTIFY sent after that read is queued and never missed between a read and a wait; one
    that is lost all the same (a dropped connection, upstream eventsourcing issues #305/#306) is
    the watchdog's job (:class:`pmem.adapters.readmodels.follower.NotifiedWait`). The channel is per database,
    not per schema: stores in other schemas of the same database wake this one up too, which
    costs one cheap re-read of the last index.
    """

    def __init__(self, conninfo: dict[str, Any], channel: str, label: str, connect_timeout: int = 10) -> None:
        self.conninfo, self.channel, self.label, self.connect_timeout = conninfo, channel, label, connect_timeout
        self.conn = self._listen()

    def _listen(self) -> psycopg.Connection[Any]:
        from pmem.domain.errors import StoreUnavailable

        try:
            conn = psycopg.connect(**self.conninfo, autocommit=True, connect_timeout=self.connect_timeout)
            conn.execute(SQL("LISTEN {}").format(Identifier(self.channel)))
        except psycopg.Error as e:
            raise StoreUnavailable(f"cannot listen for new events in {self.label}: "
                                   f"{(str(e).strip().splitlines() or [type(e).__name__])[0]}") from e
        return conn

    def wait(self, timeout: float) -> bool:
        """True when a NOTIFY arrived within ``timeout`` seconds. A broken connection is replaced
        (and reported as a notification, so the loop re-reads the log at once: anything sent while
        nobody listened is found there); a server that cannot be reached raises StoreUnavailable."""
        try:
            for _ in self.conn.notifies(timeout=max(timeout, 0.0), stop_after=1):
                return True
            return False
        except psycopg.OperationalError:
            self.conn.close()
            self.conn = self._listen()
            return True

    def close(self) -> None:
        self.conn.close()
