"""What the store's two recorders share: every read of the log, and what a batch writes beside its events
(op ids, data keys, a forget's deletes and scrubs, the compact cell state), once, through
:class:`~.log_sql.LogSql` and a cursor of the recorder's own transaction (:meth:`LogAccess._tx`).

:mod:`.sqlite_log` and :mod:`.pg_log` keep only what really differs: connections, the write lock, how
the events themselves are inserted and numbered, and each database's upkeep.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, NamedTuple
from uuid import UUID

from pmem.adapters.eventstore.cell_state import ChainRow, StateWrites
from pmem.adapters.eventstore.log_sql import LogSql, chunks

Row = tuple[str, int, str, bytes]  # a new event: (cell id hex, revision, topic, state)
KeyRow = tuple[str, int, bytes]  # (cell id hex, life, key)
ScrubRow = tuple[bytes, str, int]  # (new state, cell id hex, revision)
RawRows = dict[str, list[tuple[Any, ...]]]


class Forgetting(NamedTuple):
    """What a ``forget`` batch changes beside appending its events: the cells whose keys go, and the
    plaintext (never sealed) events of those cells, rewritten without their sensitive fields."""

    cells: list[str]
    scrub: list[ScrubRow]


class LogAccess:
    """The reads of the log and the writes beside a batch's events, for a recorder that has ``sql``
    and ``_tx``."""

    sql: LogSql
    states: CellStates  # made by the recorder: CellStates(self)

    _local: threading.local  # the cursor of a thread's open batch()

    def _transaction(self, *, commit: bool) -> AbstractContextManager[Any]:
        """A cursor in a transaction of its own (rolled back unless ``commit``)."""
        raise NotImplementedError

    def _begin_batch(self, c: Any) -> None:
        """Take the write lock at the start of a :meth:`batch`."""
        raise NotImplementedError

    def _end_batch(self, c: Any) -> None:
        """Undo what :meth:`_begin_batch` changed on the connection."""

    @contextmanager
    def _tx(self, *, commit: bool) -> Iterator[Any]:
        """The cursor of this thread's open :meth:`batch`, else of a transaction of its own."""
        open_cursor = getattr(self._local, "cursor", None)
        if open_cursor is not None:
            yield open_cursor
            return
        with self._transaction(commit=commit) as c:
            yield c

    @contextmanager
    def batch(self) -> Iterator[None]:
        """One write transaction around many ``insert_rows`` (a batch streamed in chunks): every insert
        and read of this thread inside it goes through it, so each chunk sees the chunks before it; an
        exception rolls it all back. The write lock is taken first, so what is read inside is current
        and no other writer interleaves."""
        with self._transaction(commit=True) as c:
            self._begin_batch(c)
            self._local.cursor = c
            try:
                yield
            finally:
                self._local.cursor = None
                self._end_batch(c)

    # -- beside a batch's events ------------------------------------------------------------------
    def _write_beside(self, c: Any, first: int, count: int, op_ids: Iterable[tuple[str, str, int]],
                      keys: Iterable[KeyRow], forgetting: Forgetting | None, states: Any) -> None:
        """The op ids (``(namespace, op id, position)``), the new data keys, a forget's changes and the
        cell state of a batch whose ``count`` events start at index ``first``, with its cursor ``c``."""
        s, d = self.sql, self.sql.d
        d.insert(c, f"INSERT INTO {s.op_ids}", ("text", "text", "int"),
                 [(ns, op_id, first + pos) for ns, op_id, pos in op_ids])
        self._insert_keys(c, keys)
        if forgetting is not None:
            for part in chunks(d, forgetting.cells):
                c.execute(s.ids.delete_keys(len(part)), d.any_params(part))
            if forgetting.scrub:
                c.executemany(s.log.scrub(), forgetting.scrub)
        if states is not None:
            self.states.write(c, states())
            if count:  # (no events, no write: an empty batch holds only a read snapshot, which may be stale)
                c.execute(s.state.advance(), (first + count - 1, first - 1))

    def write_held(self, keys: Iterable[KeyRow], states: StateWrites) -> None:
        """New data keys and cell records a streamed batch held back (:mod:`.write_behind`), written in
        its transaction."""
        with self._tx(commit=True) as c:
            self._insert_keys(c, keys)
            self.states.write(c, states)

    def _insert_keys(self, c: Any, keys: Iterable[KeyRow]) -> None:
        self.sql.d.insert(c, f"INSERT INTO {self.sql.keys}", ("text", "int", "blob"), sorted(keys))

    # -- reads ----------------------------------------------------------------------------------
    def select_cells(self, ids: Sequence[UUID], upto: int | None = None) -> RawRows:
        """Raw rows ``(index, cell id hex, revision, topic, state)`` per cell, in revision order."""
        return self._per_cell(self.sql.log.rows_of, [i.hex for i in ids], upto)

    def select_cells_after(self, cells: Sequence[tuple[str, int]], upto: int) -> RawRows:
        """As :meth:`select_cells`, but of each ``(cell id hex, revision)`` only the rows after that
        revision (and with index ``<= upto``): a fold that goes on from where it stopped reads only those."""
        return self._per_cell(self.sql.log.rows_after, cells, upto)

    def _per_cell(self, query: Any, items: Sequence[Any], upto: int | None) -> RawRows:
        out: RawRows = {}
        with self._tx(commit=False) as c:
            for part in chunks(self.sql.d, items):
                c.execute(*query(part, upto))
                for row in c.fetchall():
                    out.setdefault(row[1], []).append(row)
        return out

    def select_rows(self, start: int, stop: int | None, limit: int) -> list[tuple[Any, ...]]:
        """Raw rows with ``start <= index <= stop``, at most ``limit``."""
        return self._all(*self.sql.log.rows(start, stop, limit))

    def select_rows_of_cells(self, cells: tuple[str, str | None], stop: int, ranges: int) -> list[tuple[Any, ...]]:
        """Raw rows with index ``<= stop`` of the cells in the range ``cells``, one of ``ranges``."""
        return self._all(*self.sql.log.range_rows(cells, stop, ranges))

    def cells_at(self, indices: Sequence[int]) -> list[tuple[int, str]]:
        """``(event index, cell id hex)`` of each of the events at ``indices`` that exists."""
        out: list[tuple[int, str]] = []
        with self._tx(commit=False) as c:
            for part in chunks(self.sql.d, indices):
                c.execute(*self.sql.log.cells_at(part))
                out.extend((int(i), str(h)) for i, h in c.fetchall())
        return out

    def lookup_op_ids(self, namespace: str, op_ids: Sequence[str]) -> dict[str, int]:
        found: dict[str, int] = {}
        with self._tx(commit=False) as c:
            for part in chunks(self.sql.d, op_ids):
                c.execute(self.sql.ids.op_ids_of(len(part)), [namespace, *self.sql.d.any_params(part)])
                found.update((r[0], int(r[1])) for r in c.fetchall())
        return found

    def select_keys(self, cells: Sequence[str]) -> dict[str, tuple[int, bytes]]:
        """``cell id hex -> (life, key)`` of those of ``cells`` that have a data key."""
        out: dict[str, tuple[int, bytes]] = {}
        with self._tx(commit=False) as c:
            for part in chunks(self.sql.d, cells):
                c.execute(self.sql.ids.keys_of(len(part)), self.sql.d.any_params(part))
                out.update((r[0], (int(r[1]), bytes(r[2]))) for r in c.fetchall())
        return out

    def select_keys_range(self, cells: tuple[str, str | None]) -> dict[str, tuple[int, bytes]]:
        """The data keys of the cells in a range of cell ids."""
        return {r[0]: (int(r[1]), bytes(r[2])) for r in self._all(*self.sql.ids.keys_in(*cells))}

    def max_notification_id(self) -> int:
        return int(self._all(self.sql.log.last_index(), ())[0][0])

    def _all(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        with self._tx(commit=False) as c:
            c.execute(sql, params)
            return list(c.fetchall())


class CellStates:
    """The compact cell state's tables (:mod:`.cell_state`), read and written through a recorder's
    transactions."""

    def __init__(self, recorder: LogAccess) -> None:
        self.r, self.s = recorder, recorder.sql

    def write(self, c: Any, w: StateWrites) -> None:
        """Write the compact cell state's changes with cursor ``c``."""
        d = self.s.d
        for part in chunks(d, w.cleared):
            c.execute(self.s.state.clear_chains(len(part)), d.any_params(part))
        if w.unchained:
            c.executemany(self.s.state.unchain(), w.unchained)
        d.insert(c, f"INSERT INTO {self.s.chain}", ("text", "int", "text", "int", "int"), w.chain,
                 self.s.state.upsert_chain())
        # the records in primary-key order: a chunk's rows then touch each page of the table once, in
        # order (with many cells, they land all over a table far bigger than the page cache)
        d.insert(c, f"INSERT INTO {self.s.cells}", ("text", "text", "int", "blob"), sorted(w.states),
                 self.s.state.upsert_state())

    def position(self) -> int | None:
        """The last event index the state reflects (None: never recorded)."""
        rows = self.r._all(self.s.state.state_position(), ())
        return int(rows[0][0]) if rows else None

    def replace(self, w: StateWrites, position: int) -> None:
        """Replace the whole state by ``w``, folded from the log up to ``position``."""
        with self.r._tx(commit=True) as c:
            c.execute(f"DELETE FROM {self.s.chain}")
            c.execute(f"DELETE FROM {self.s.cells}")
            self.write(c, w)
            c.execute(self.s.state.set_position(), (position,))

    def select(self, cells: Sequence[str]) -> dict[str, tuple[int, bytes]]:
        """``cell id hex -> (revision, compact state)`` of those of ``cells`` that have events."""
        out: dict[str, tuple[int, bytes]] = {}
        with self.r._tx(commit=False) as c:
            for part in chunks(self.s.d, cells):
                c.execute(self.s.state.states_of(len(part)), self.s.d.any_params(part))
                out.update((r[0], (int(r[1]), bytes(r[2]))) for r in c.fetchall())
        return out

    def chain(self, starts: Sequence[tuple[str, int, int]]) -> list[ChainRow]:
        """The chain rows of each ``(cell id hex, first version id, rows)``: that many rows at most,
        following each row's ``below`` (:mod:`.cell_state`)."""
        out: list[ChainRow] = []
        d = self.s.d
        with self.r._tx(commit=False) as c:
            for part in chunks(d, starts, d.rows_chunk):
                c.execute(self.s.state.chain_walk(len(part)), d.rows_params(part))
                out.extend(c.fetchall())
        return out

    def counts(self) -> tuple[int, int]:
        """(cells, namespaces) that hold events."""
        cells, namespaces = self.r._all(self.s.state.state_counts(), ())[0]
        return int(cells), int(namespaces)
