"""The PostgreSQL event log: eventsourcing's postgres persistence, extended for P-Mem like
:mod:`pmem.adapters.eventstore.sqlite_log` extends the SQLite one (same methods, same guarantees).

Selected with ``PERSISTENCE_MODULE=pmem.adapters.eventstore.pg_log:Factory``. On top of the stock recorder it
- inserts a batch with one ``INSERT ... SELECT FROM unnest(...)`` under the stock ``EXCLUSIVE`` table
  lock (readers are not blocked), and ``NOTIFY``s the channel the stock subscription listens on;
- numbers the events itself, ``max + 1 ...`` under that lock, so event indices have no gaps even
  when a transaction rolls back (a ``bigserial`` would skip the numbers it handed out). Every write
  goes through this path (``EventLog.save``, the library's, is refused), so the sequence is never used;
- writes the op ids, data keys and compact cell state in the same transaction, and reads the log, as
  the SQLite recorder does (:mod:`.log_access`; every statement: :mod:`.log_sql`).

A version conflict (another writer recorded the same cell version first) fails the whole
transaction with :class:`eventsourcing.persistence.IntegrityError`, as on SQLite.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresFactory
from psycopg.rows import tuple_row
from psycopg.sql import SQL, Identifier

from pmem.adapters.eventstore.cell_state import StateWrites
from pmem.adapters.eventstore.log_access import CellStates, Forgetting, KeyRow, LogAccess, Row
from pmem.adapters.eventstore.log_sql import LogSql, PgDialect


class PmemPgRecorder(LogAccess, PostgresApplicationRecorder):
    """The application recorder plus op-id idempotency, gap-free indices and bulk cell loading (its
    SQL: :mod:`.log_sql`)."""

    def __init__(self, datastore: Any, **kwargs: Any) -> None:
        super().__init__(datastore, **kwargs)
        self.sql = LogSql(PgDialect(self.datastore.schema))
        self.sql_create_statements.extend(SQL(s).format() for s in self.sql.create_statements())
        self._local = threading.local()
        self.states = CellStates(self)

    @contextmanager
    def _transaction(self, *, commit: bool) -> Iterator[psycopg.Cursor[Any]]:
        """A tuple cursor; library errors are translated to eventsourcing's persistence errors by the
        datastore."""
        with self.datastore.get_connection() as conn, conn.transaction(force_rollback=not commit):
            yield conn.cursor(row_factory=tuple_row)

    def _begin_batch(self, c: Any) -> None:
        for statement in self.lock_table_statements:
            c.execute(statement)

    # -- writing -------------------------------------------------------------
    def insert_rows(self, rows: Iterable[Row], count: list[int], op_ids: Iterable[tuple[str, str, int]] = (),
                    keys: Iterable[KeyRow] = (), forgetting: Forgetting | None = None,
                    states: Callable[[], StateWrites] | None = None) -> int:
        """Insert rows ``(originator_id_hex, version, topic, state)`` in one transaction; return the
        event index of the first (the rest follow consecutively). The contract of
        :meth:`pmem.adapters.eventstore.sqlite_log.PmemRecorder.insert_rows`."""
        batch = list(rows)  # decided and encoded before the table lock is taken
        with self._tx(commit=True) as c:
            first = self._insert_locked(c, batch)
            self._write_beside(c, first, len(batch), op_ids, keys, forgetting, states)
        return first

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

    def _insert_locked(self, c: Any, batch: list[Row]) -> int:
        """Insert ``batch`` under the table lock, numbered from the last index on; the first index."""
        for statement in self.lock_table_statements:
            c.execute(statement)
        c.execute(SQL("NOTIFY {}").format(Identifier(self.channel_name)))
        c.execute(self.sql.log.last_index())
        first = int(c.fetchone()[0]) + 1
        if batch:
            sql, _ = self.sql.log.insert_numbered(len(batch))
            c.execute(sql, [*self.sql.d.rows_params(batch), list(range(first, first + len(batch)))])
        return first

    def integrity_check(self) -> str:
        """``ok``, or what is wrong: indices must run 1..N without a gap, every op id must name an
        event of its namespace (PostgreSQL checks its own pages; this checks P-Mem's invariants)."""
        (n, lo, hi), = self._all(self.sql.log.index_bounds(), ())
        if (lo or 1, hi) != (1, n):
            return f"event indices are not 1..{n}: they run {lo or 1}..{hi}"
        dangling = int(self._all(self.sql.ids.dangling_op_ids(), ())[0][0])
        return "ok" if dangling == 0 else f"{dangling} op ids name no event"


class Factory(PostgresFactory):
    """The persistence factory ``eventsourcing`` finds in this module."""

    application_recorder_class = PmemPgRecorder


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
