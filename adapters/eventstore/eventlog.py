"""The event store: an ``eventsourcing`` Application over the P-Mem log (SQLite or PostgreSQL).

The write path is lean but goes through the domain: operations are decided on ``MemoryCell``
aggregates holding each cell's compact state (:mod:`.cell_state`: what ``decide`` needs, read in one
query per chunk, whatever the cell's history), encoded with the orjson codec and inserted with one
``executemany`` per batch, all cells of a batch and their compact states in one transaction.
The recorder is :class:`.sqlite_log.PmemRecorder` or
:class:`.pg_log.PmemPgRecorder`, as :mod:`pmem.adapters.storage.backend` chooses from the store's name.
A version conflict (another writer got there first) reloads the cells and decides again, so no
operation is ever lost; a resent ``op_id`` appends nothing. Each event's values, evidence text,
source and reason are sealed under its cell's data key (:mod:`.sealing`; a cell's first event makes
the key, in the same transaction); :meth:`EventLog.forget` appends ``Forgotten`` and deletes the key.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, NoReturn
from uuid import UUID

import orjson
from eventsourcing.application import Application
from eventsourcing.persistence import IntegrityError, PersistenceError

from pmem.adapters.eventstore.cell_state import (
    ROLLBACK_OPS,
    StateWrites,
    add_chain,
    chain_starts,
    compact,
    decode,
    states_from_log,
)
from pmem.adapters.eventstore.codec import decode_event, encode_state, timestamp_envelope
from pmem.adapters.eventstore.gc_pause import no_gc
from pmem.adapters.eventstore.log_access import Forgetting
from pmem.adapters.eventstore.packed import PackedCells
from pmem.adapters.eventstore.sealing import FORGOTTEN_TOPIC, Key, Keyring, key_scope, new_key, nonces, scrubbed, seal
from pmem.adapters.eventstore.stored_log import CellRange
from pmem.adapters.eventstore.write_behind import WriteBehind
from pmem.adapters.storage.backend import open_backend
from pmem.domain.cell import CellEvent, Forgotten, MemoryCell, NotApplied
from pmem.domain.decide import execute
from pmem.domain.errors import (
    ConflictRetriesExhausted,
    InvalidBatch,
    InvalidOperation,
    RetryConflict,
    StoreUnavailable,
)
from pmem.domain.keys import cell_id
from pmem.domain.operations import Operation, check_operation
from pmem.domain.state import CellState
from pmem.domain.views import Head, Receipt
from pmem.projections.replay import IndexedEvent, fold

MAX_CACHED_CELLS = 200_000
# A streamed batch keeps at most this many cells between its chunks (each in its compact state, about
# 1 KB with its data key's bytes); past it they are let go and read again from the state table. (Few:
# the records it holds back, .write_behind, need the room; 1,000,000 new keys peaked at 291 MB with
# 49,152 and 243 MB with this, in the same time.)
STREAM_CACHED_CELLS = 16_384
# ... and, past those, the state records it wrote (with the cells' raw data keys, about 300 bytes a cell),
# so a cell touched again later in the batch is not read again (nor its key): many keys, each touched
# every few chunks, no longer cost a query per line
STREAM_PACKED_CELLS = 131_072
STREAM_PACKED_BYTES = 48 * 2**20  # the room of a streamed batch's resent operations' folds (see .packed)
_Made = tuple[type[CellEvent], Operation, str | None, Head | None]
"""The parts of a new event's receipt: its class, the operation, the reason and the head after it."""
_uncached_cell_id = cell_id.__wrapped__
READ_BATCH = 5_000
RECEIPT_CELLS = 2_000


class EventLog(Application[UUID]):
    """The P-Mem log. ``path`` is a SQLite file, ``":memory:"`` for a private in-memory database, or a
    ``postgresql://`` URL (see :mod:`pmem.adapters.storage.backend`)."""

    name = "pmem"
    def __init__(self, path: str | Path, *, synchronous: str = "FULL", max_retries: int = 100) -> None:
        self.backend = open_backend(path)
        self.db = self.backend.label
        self._errors: tuple[type[BaseException], ...] = (PersistenceError, *self.backend.errors)
        self.max_retries = max_retries
        self._cells: dict[tuple[str, str], tuple[MemoryCell, str]] = {}  # compact states (see .cell_state)
        self.stream_cached_cells = STREAM_CACHED_CELLS  # the cells a streamed batch holds between chunks
        self.stream_packed_cells = STREAM_PACKED_CELLS  # ... and the state records it keeps past those
        # a streamed batch's state records, ``cell id hex -> (revision, record, raw data key or None)``:
        # valid only inside the batch (it holds the write lock)
        self._stream_states: dict[str, tuple[int, bytes, tuple[int, bytes] | None]] = {}
        # a streamed batch's resent operations' cells folded (for their receipts), packed: valid only
        # inside the batch (it holds the write lock)
        self._folds = PackedCells(STREAM_PACKED_BYTES)
        self._stream_folds: PackedCells | None = None  # self._folds while a streamed batch runs
        self.sealing = True  # False: write plaintext events (only the benchmark's baseline does)
        with self.backend.setting_up():
            try:
                super().__init__(env=self.backend.log_env(synchronous))
            except self._errors + (OSError,) as e:
                raise StoreUnavailable(f"cannot open store {self.db}: {_first_line(e)}") from e
        self.keys = Keyring(key_scope(self.backend), lambda cells: self._read(self.recorder.select_keys, cells))
        self._held = WriteBehind()  # a streamed batch's records and new keys, until its flush
        self.keys.unstored = self._held.keys
        self._heal_state()

    recorder: Any  # pmem.adapters.eventstore.sqlite_log.PmemRecorder or pmem.adapters.eventstore.pg_log.PmemPgRecorder

    def save(self, *objs: Any, **kwargs: Any) -> NoReturn:
        """Refused: the library's save would append events without sealing, op ids or cell state (and
        on PostgreSQL number them from a sequence this log never advances); :meth:`execute` records."""
        raise NotImplementedError("EventLog records operations with execute(), not the library's save()")

    # -- writing -------------------------------------------------------------
    def execute(self, ops: Sequence[Operation]) -> list[Receipt]:
        """Record every operation (as one atomic batch) and return one receipt each, in order. Every
        operation is checked first (:func:`~pmem.domain.operations.check_operation`): one that could not
        have come from ``parse_operation`` raises :class:`InvalidBatch` naming its 1-based position, and
        nothing is written."""
        if not isinstance(ops, (list, tuple)):
            ops = list(ops)  # checked, then decided: read it once
        if not ops:
            return []
        _check_all(ops, 0)
        with no_gc(len(ops) > 1000):  # a big batch's long-lived objects hold no cycles for the collector to find
            return self._execute_with_retries(ops)

    def execute_stream(self, chunks: Iterable[Sequence[Operation]], sink: Callable[[list[Receipt]], None]) -> int:
        """Record a batch given in chunks as ONE atomic batch, in memory bounded by a chunk: all chunks
        go in one transaction (the write lock taken first, so nothing read inside goes stale and no
        other writer interleaves), each chunk's receipts handed to ``sink`` as it is recorded (before
        the commit: the caller keeps them until this returns). An exception from ``chunks`` (a bad
        line) or from checking an operation (:class:`InvalidBatch`, numbered across the whole batch)
        rolls everything back. Returns the number of operations."""
        it = iter(chunks)
        first_chunk = next(it, None)
        if first_chunk is None:
            return 0
        count = 0
        try:
            with no_gc(), self.recorder.batch():
                self._drop_cells()  # read afresh under the lock: a cached cell may be stale
                self._heal_locked()
                self._stream_folds = self._folds
                chunk: Sequence[Operation] | None = first_chunk
                while chunk is not None:
                    ops = chunk if isinstance(chunk, (list, tuple)) else list(chunk)
                    _check_all(ops, count)
                    if ops:
                        sink(self._execute_once(ops))
                    count += len(ops)
                    chunk = next(it, None)
                    self._bound_stream_cache()
                self._held.flush(self.recorder)
        except BaseException as e:
            self._drop_cells()
            self.keys.drop_all()  # keys made by a rolled-back batch exist nowhere: read them all afresh
            if isinstance(e, self._errors):
                raise StoreUnavailable(f"cannot write to store {self.db}: {_first_line(e)}") from e
            raise
        finally:
            self._stream_folds = None
            self._folds.clear()
            self._stream_states.clear()
        return count

    def _bound_stream_cache(self) -> None:
        """After a streamed batch's chunk: past :attr:`stream_cached_cells` cells held, let them and
        their data keys go, so memory stays bounded, not the batch's (a cell touched again is taken
        from the records the batch wrote, :attr:`_stream_states`, with its key, or read from the state
        table, in the transaction)."""
        if len(self._cells) > self.stream_cached_cells:
            hexids = [h for _, h in self._cells.values()]
            packed, held = self._stream_states, self.keys.held
            for h in hexids:
                found = packed.get(h)
                if found is not None:
                    packed[h] = (found[0], found[1], held(h))
            self.keys.drop(hexids)
            self._cells.clear()  # (by reference counts: a held cell is in no reference cycle)
        self._folds.bound()

    def _drop_cells(self) -> None:
        self._cells.clear()
        self._stream_states.clear()
        self._held.clear()
        self._folds.clear()

    def _heal_state(self) -> None:
        """Rebuild the compact cell state from the log when it does not reflect the whole log: a store
        made before it, an import, or events appended by a release that does not keep it (each batch
        records the last index the state reflects, in its transaction; :mod:`.cell_state`). One query
        when the state is current."""
        if self._read(self.recorder.states.position) == self.last_index():
            return
        try:
            with self.recorder.batch():
                self._heal_locked()
        except self._errors as e:
            raise StoreUnavailable(f"cannot build the cell state of store {self.db}: {_first_line(e)}") from e

    def _heal_locked(self) -> None:
        """:meth:`_heal_state` inside an open batch (the write lock held: no writer interleaves)."""
        last = self.recorder.max_notification_id()
        if self.recorder.states.position() == last:
            return  # another process rebuilt it first
        self._drop_cells()
        self.recorder.states.replace(states_from_log(self.indexed_events(1, last)), last)

    def _execute_with_retries(self, ops: Sequence[Operation]) -> list[Receipt]:
        return self._retrying(self._execute_once, ops)

    def _retrying(self, once: Callable[[Any], list[Receipt]], arg: Any) -> list[Receipt]:
        """``once(arg)``, decided again after a version conflict (another writer got there first) with
        the cells read afresh, up to :attr:`max_retries` times."""
        for attempt in range(self.max_retries):
            try:
                return once(arg)
            except IntegrityError:
                self._drop_cells()  # someone else wrote these cells: reload and decide again
                self._heal_state()  # (a writer that keeps no cell state leaves every retry a conflict)
                time.sleep(random.uniform(0, min(0.002 * 2**attempt, 0.2)))
            except self._errors as e:
                self._drop_cells()
                raise StoreUnavailable(f"cannot write to store {self.db}: {_first_line(e)}") from e
            except BaseException:
                self._drop_cells()
                raise
        raise ConflictRetriesExhausted(
            f"gave up after {self.max_retries} attempts: other writers kept changing the same cells")

    def _execute_once(self, ops: Sequence[Operation]) -> list[Receipt]:
        known = self._known_op_ids(ops)
        # a resent operation decides nothing: its cell need not be loaded
        cells = self._load_cells({(op.namespace, op.key) for op in ops
                                  if op.evidence.op_id is None or (op.namespace, op.evidence.op_id) not in known})
        fetched = self._load_chains(cells, ops)
        stamp = timestamp_envelope(datetime.now(UTC))
        # Per operation: the parts of a new event's receipt, or where an earlier receipt lives. (Not the
        # event's fields: a dict per operation held to the end is most of a big batch's memory.)
        outcomes: list[_Made | tuple[str, int]] = []
        op_id_rows: list[tuple[str, str, int]] = []
        # the cells' data keys, and those this batch makes (their rows: read, like op_id_rows, once rows() is done)
        # (a cell with no event yet has no key: only a cell's first event makes one)
        batch_keys: dict[str, Key] = self.keys.lookup(h for c, h in cells.values() if c.version) if self.sealing else {}
        key_rows: list[tuple[str, int, bytes]] = []
        nonce_pool = nonces(len(ops)) if self.sealing else b""  # one lock and one slice of the pool per chunk
        count = [0]

        def rows() -> Iterator[tuple[str, int, str, bytes]]:
            """Decide, apply and encode each operation as the recorder binds it (nothing is kept but
            the receipt parts: building every encoded event first is several times slower)."""
            first_seen: dict[tuple[str, str], int] = {}
            for i, op in enumerate(ops):
                oid = op.evidence.op_id
                if oid is not None:
                    k = (op.namespace, oid)
                    if k in known:
                        outcomes.append(("old", known[k]))
                        continue
                    if k in first_seen:
                        outcomes.append(("dup", first_seen[k]))
                        continue
                    first_seen[k] = i
                    op_id_rows.append((op.namespace, oid, count[0]))
                cell, hexid = cells[op.namespace, op.key]
                event_class, fields = execute(cell, op)
                h = cell.state.head
                outcomes.append((event_class, op, fields["reason"], None if h is None else Head(h.value, h.status)))
                fields["timestamp"] = stamp
                if self.sealing:
                    at = 12 * count[0]
                    self._sealed(fields, hexid, cell.version, batch_keys, key_rows, nonce_pool[at:at + 12])
                count[0] += 1
                yield hexid, cell.version, event_class.TOPIC, encode_state(fields, event_class.class_version)

        writes = StateWrites([], [], [], [])
        stream = self._stream_folds is not None

        def states() -> StateWrites:
            self._compacted(cells, fetched, writes)
            return writes._replace(states=[]) if stream else writes  # (a stream's are held: .write_behind)

        first = self.recorder.insert_rows(rows(), count, op_id_rows, () if stream else key_rows, states=states)
        for c, life, raw in key_rows:
            self.keys.remember(c, life, raw)
        self._cells.update(cells)
        if stream:
            self._hold(writes, key_rows)
        earlier = self.receipts_at([o[1] for o in outcomes if len(o) == 2 and o[0] == "old"], self._stream_folds)
        return _receipts(outcomes, first, earlier)

    def _hold(self, writes: StateWrites, key_rows: list[tuple[str, int, bytes]]) -> None:
        """Keep a streamed chunk's records (for cells touched again) and hold them back with its new keys;
        past :attr:`stream_packed_cells` records kept, store the held ones and let the kept ones go."""
        packed = self._stream_states
        if len(packed) + len(writes.states) > self.stream_packed_cells:
            self._held.flush(self.recorder)  # a record let go is read from the table again
            packed.clear()
        rows = []
        for h, ns, revision, blob in writes.states:
            # a copy: orjson's bytes keep the 4 KiB it first allocated (50,000 cells: 195 MiB)
            record = bytes(memoryview(blob))
            packed[h] = (revision, record, None)
            rows.append((h, ns, revision, record))
        self._held.hold(rows, key_rows)

    @staticmethod
    def _sealed(fields: dict[str, Any], hexid: str, revision: int, batch_keys: dict[str, Key],
                key_rows: list[tuple[str, int, bytes]], nonce: bytes) -> None:
        """Seal ``fields`` in place under the cell's key, with ``nonce``; a cell without a key (new, or
        forgotten) gets a new one whose life starts at this revision (a row of ``key_rows``)."""
        key = batch_keys.get(hexid)
        if key is None:
            key, raw = new_key(revision)
            batch_keys[hexid] = key
            key_rows.append((hexid, revision, raw))
        seal(fields, hexid, revision, key, nonce)

    @staticmethod
    def _compacted(cells: dict[tuple[str, str], tuple[MemoryCell, str]], fetched: dict[str, list[int]],
                   writes: StateWrites) -> StateWrites:
        """The compact state of every cell of a batch that has events, put in place of its state in
        ``cells``, and its rows in ``writes``."""
        for cell, hexid in cells.values():
            if cell.version:
                cell.state = compact(hexid, cell.state, cell.version, fetched.get(hexid, ()), writes)
        return writes

    def _load_chains(self, cells: dict[tuple[str, str], tuple[MemoryCell, str]],
                     ops: Sequence[Operation]) -> dict[str, list[int]]:
        """Read the chain rows a batch's rollbacks may reinstate (one query per chunk of cells), into
        their cells' states; ``cell id hex -> version ids`` read."""
        rollbacks: dict[tuple[str, str], int] = {}
        for op in ops:
            if op.op in ROLLBACK_OPS:
                k = (op.namespace, op.key)
                rollbacks[k] = rollbacks.get(k, 0) + 1
        starts, states = [], {}
        for k, n in rollbacks.items():
            if k in cells and (start := chain_starts(cells[k][0].state, n)) is not None:
                hexid = cells[k][1]
                starts.append((hexid, *start))
                states[hexid] = cells[k][0].state
        if not starts:
            return {}
        rows: dict[str, list[Any]] = {}
        for row in self.recorder.states.chain(starts):
            rows.setdefault(row[0], []).append(row)
        return {hexid: add_chain(states[hexid], found) for hexid, found in rows.items()}

    def _known_op_ids(self, ops: Sequence[Operation]) -> dict[tuple[str, str], int]:
        wanted: dict[str, list[str]] = {}
        for op in ops:
            if op.evidence.op_id is not None:
                wanted.setdefault(op.namespace, []).append(op.evidence.op_id)
        known: dict[tuple[str, str], int] = {}
        for ns, op_ids in wanted.items():
            for oid, index in self.recorder.lookup_op_ids(ns, op_ids).items():
                known[(ns, oid)] = index
        rule = getattr(_RESENDS, "rule", None)
        if rule is not None and known:
            self._check_resent(ops, known, rule)
        return known

    def _check_resent(self, ops: Sequence[Operation], known: dict[tuple[str, str], int], rule: ResendRule) -> None:
        """:func:`resend_conflict` for the first of ``ops`` whose op id was recorded for another operation
        (as ``rule`` compares them: see :func:`strict_resends`).
        Runs where the op ids are looked up, so a concurrent first use of the same op id cannot slip in
        between (its insert would fail on the op-id key, and the batch be decided again)."""
        recorded = self._events_at(sorted(set(known.values())))
        for op in ops:
            index = known.get((op.namespace, op.evidence.op_id)) if op.evidence.op_id is not None else None
            event = recorded.get(index) if index is not None else None
            if event is not None and not _same_operation(op, event, rule):
                raise resend_conflict(op)

    def _events_at(self, indices: Sequence[int]) -> dict[int, CellEvent]:
        """The events at ``indices`` (sorted), read a run of nearby indices at a time (a resent batch's are
        usually one run)."""
        out: dict[int, CellEvent] = {}
        wanted = set(indices)
        for start, stop in _runs(indices, 256):
            out.update((i, e) for i, e in self.indexed_events(start, stop) if i in wanted)
        return out

    def _load_cells(self, keys: set[tuple[str, str]]) -> dict[tuple[str, str], tuple[MemoryCell, str]]:
        """The cells ``(namespace, key)`` as they are now (each with its id in hex), from the cache
        or the log; a cell with no events yet is a fresh shell."""
        if len(self._cells) > MAX_CACHED_CELLS:
            self._drop_cells()
        held = self._cells
        cells = {k: c for k in keys if (c := held.get(k)) is not None}
        # Not cell_id's process-wide cache: a cell read here is held in self._cells, which is the
        # write path's cache; the shared one would only grow with the batch's cells (330 B each).
        missing = {_uncached_cell_id(*k): k for k in keys if k not in cells}
        if missing:
            now = datetime.now(UTC)
            # a streamed batch's own records first: each was written (or read, its key with it) under
            # the batch's lock, so it and its key are current; only the others are read
            packed, unread = self._stream_states, []
            stored: dict[str, tuple[int, bytes]] = {}
            for cid in missing:
                h = cid.hex
                found_packed = packed.get(h)
                if found_packed is None:
                    unread.append(h)
                    continue
                stored[h] = found_packed[:2]
                if found_packed[2] is not None:
                    self.keys.remember(h, *found_packed[2])
            read = self.recorder.states.select(unread) if unread else {}
            self.keys.refresh(read)
            stored.update(read)
            for cid, k in missing.items():
                cell: Any = MemoryCell.shell(cid, k[0], k[1], now)
                found = stored.get(cid.hex)
                if found is not None:
                    cell.state, cell.version = decode(k[0], k[1], found[1])
                cells[k] = (cell, cid.hex)
        return cells

    def state_mismatches(self, ids: Sequence[UUID] | None = None) -> list[str]:
        """The cells (ids in hex) whose compact state (record or chain) is not the one folded from the
        log: none, unless the state tables were damaged or written around this store. Folds the cells
        ``ids`` (``pmem doctor``'s sample), or the whole log in memory, counting the records too."""
        if ids is None:
            want = states_from_log(self.indexed_events())
        else:
            want = states_from_log(e for events in self.cell_events(ids).values() for e in events)
        have = self._read(self.recorder.states.select, [r[0] for r in want.states])
        bad = [h for h, _, revision, blob in want.states if have.get(h) != (revision, blob)]
        if ids is None and self._read(self.recorder.states.counts)[0] != len(want.states):
            bad.append("(cells without events)")
        chains: dict[str, list[tuple[Any, ...]]] = {}
        for row in want.chain:
            chains.setdefault(row[0], []).append(row)
        found: dict[str, list[tuple[Any, ...]]] = {}
        starts = [(h, rows[0][1], len(rows)) for h, rows in chains.items()]
        for row in self._read(self.recorder.states.chain, starts):
            found.setdefault(row[0], []).append(tuple(row))
        return bad + [h for h, rows in chains.items() if sorted(found.get(h, [])) != sorted(rows)]

    # -- forgetting ----------------------------------------------------------
    def forget(self, keys: Sequence[tuple[str, str]]) -> list[Receipt]:
        """Forget the cells ``(namespace, key)``: append ``Forgotten`` to each that holds anything
        since its last forget, delete its data key and scrub its plaintext events, all in one
        transaction; then checkpoint the WAL (SQLite). One receipt per cell forgotten."""
        receipts = self._retrying(self._forget_once, keys)
        if receipts and hasattr(self.recorder, "checkpoint"):
            self._read(self.recorder.checkpoint)
        return receipts

    def _forget_once(self, keys: Sequence[tuple[str, str]]) -> list[Receipt]:
        cells = self._load_cells(set(keys))
        todo = [(k, c, h) for k, (c, h) in sorted(cells.items())
                if c.version > 0 and c.state.forgotten_at != c.version]
        if not todo:
            return []
        stamp = timestamp_envelope(datetime.now(UTC))
        rows, scrub = [], []
        for (ns, key), cell, hexid in todo:
            fields: dict[str, Any] = {"namespace": ns, "key": key, "requested": "forget", "reason": None,
                                      "text": None, "source": None, "trust": 0, "observed_at": None,
                                      "op_id": None, "node_type": None, "value": None}
            Forgotten.transition(cell.state, fields, cell.version + 1)
            cell.version += 1
            fields["timestamp"] = stamp
            rows.append((hexid, cell.version, FORGOTTEN_TOPIC, encode_state(fields, Forgotten.class_version)))
        stored = self.recorder.select_cells([cell.id for _, cell, _ in todo])
        for hexid, found in stored.items():
            for _, _, version, _, state in found:
                clean = scrubbed(orjson.loads(state))
                if clean is not None:
                    scrub.append((orjson.dumps(clean), hexid, version))
        forgetting = Forgetting([h for _, _, h in todo], scrub)
        try:
            forgot = {k: (c, h) for k, c, h in todo}
            first = self.recorder.insert_rows(rows, [len(rows)], (), (), forgetting,
                                              states=lambda: self._compacted(forgot, {}, StateWrites([], [], [], [])))
        finally:
            self.keys.drop(forgetting.cells)
        self._cells.update(forgot)
        return [Receipt(first + i, ns, key, "forget", "forget", True, None, None)
                for i, ((ns, key), _, _) in enumerate(todo)]

    # -- reading the log -----------------------------------------------------
    def cell_events(self, ids: Sequence[UUID], upto: int | None = None) -> dict[UUID, list[IndexedEvent]]:
        out: dict[UUID, list[IndexedEvent]] = {}
        found = self._read(self.recorder.select_cells, ids, upto)
        self.keys.refresh(found)
        for hexid, rows in found.items():
            cid = UUID(hexid)
            out[cid] = [(r[0], _decoded(r[0], r[3], r[4], cid, r[2], self.keys)) for r in rows]
        return out

    def indexed_events(self, start: int = 1, stop: int | None = None) -> Iterator[IndexedEvent]:
        while True:
            rows = self._read(self.recorder.select_rows, start, stop, READ_BATCH)
            self.keys.refresh(r[1] for r in rows)
            for index, hexid, version, topic, state in rows:
                yield index, decode_event(topic, state, UUID(hexid), version, self.keys)
            if len(rows) < READ_BATCH:
                return
            start = rows[-1][0] + 1

    def rows(self, start: int, stop: int | None, limit: int) -> list[tuple[int, str, int, str, bytes]]:
        """Raw rows ``(event index, cell id hex, cell revision, topic, state)`` with
        ``start <= index <= stop`` (``stop`` None: to the end), at most ``limit``."""
        return list(self._read(self.recorder.select_rows, start, stop, limit))

    def rows_of_cells(self, cells: CellRange, stop: int, ranges: int) -> list[tuple[int, str, int, str, bytes]]:
        """Every stored row ``(event index, cell id hex, cell revision, topic, state)`` with index
        ``<= stop`` of the cells in the range ``cells`` (one of ``ranges``; see ``stored_log.range_rows``)."""
        return list(self._read(self.recorder.select_rows_of_cells, cells, stop, ranges))

    def load_keys(self, cells: CellRange) -> None:
        """Cache the data keys of a range of cells (a rebuild reads the range next)."""
        self.keys.refresh_range(cells, self._read(self.recorder.select_keys_range, cells))

    def last_index(self) -> int:
        return int(self._read(self.recorder.max_notification_id))

    def state_position(self) -> tuple[int | None, int]:
        """The last event index the compact cell state reflects (None: never recorded), and the log's."""
        return self._read(self.recorder.states.position), self.last_index()

    def state_counts(self) -> tuple[int, int]:
        """(cells, namespaces) that hold events, from the compact cell state."""
        cells, namespaces = self._read(self.recorder.states.counts)
        return int(cells), int(namespaces)

    def receipt_at(self, index: int) -> Receipt:
        """The receipt an operation got when it was recorded as event ``index``."""
        (_, event), = list(self.indexed_events(index, index))
        timeline = fold(self.cell_events([event.originator_id], upto=index)[event.originator_id])
        h = next(iter(timeline.values())).state.head
        return Receipt(index, event.namespace, event.key, event.OP, event.requested, event.applied,
                       event.reason, None if h is None else Head(h.value, h.status), event.op_id)

    def receipts_at(self, indices: Sequence[int], folds: PackedCells | None = None) -> dict[int, Receipt]:
        """:meth:`receipt_at` of many events at once (a resent batch): each cell they belong to is read
        and folded once, a few thousand cells at a time. Given ``folds`` (a streamed batch's, under its
        write lock), each cell's fold is kept there, and a later call for the same cell goes on from
        where it stopped instead of folding the cell again from its first event."""
        wanted = set(indices)
        last: dict[str, int] = {}
        first: dict[str, int] = {}
        for index, hexid in self._read(self.recorder.cells_at, sorted(wanted)):
            last[hexid] = max(index, last.get(hexid, 0))
            first[hexid] = min(index, first.get(hexid, index))
        out: dict[int, Receipt] = {}
        cells = sorted(last)
        for start in range(0, len(cells), RECEIPT_CELLS):
            chunk = cells[start:start + RECEIPT_CELLS]
            upto = max(last[h] for h in chunk)
            # (index, revision, packed state) of each cell's kept fold that stopped before its first wanted event
            kept = {h: f for h in chunk if folds is not None and (f := folds.take(h)) is not None and f[0] < first[h]}
            if folds is None:
                found = self._read(self.recorder.select_cells, [UUID(h) for h in chunk], upto)
            else:
                found = self._read(self.recorder.select_cells_after, [(h, kept[h][1] if h in kept else 0)
                                                                      for h in chunk], upto)
            self.keys.refresh(found)
            for hexid in chunk:
                done, revision, state = (kept[hexid][0], kept[hexid][1], CellState.unpacked(kept[hexid][2])
                                         ) if hexid in kept else (0, 0, None)
                done, revision, state = _fold_receipts(hexid, found.get(hexid, []), done, revision, state,
                                                       self.keys, wanted, out)
                if folds is not None and state is not None:
                    folds.put(hexid, (done, revision, state.packed()))
        return out

    def _read(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except self._errors as e:
            raise StoreUnavailable(f"cannot read store {self.db}: {_first_line(e)}") from e


def _receipts(outcomes: list[_Made | tuple[str, int]], first: int, earlier: dict[int, Receipt]) -> list[Receipt]:
    """One receipt per operation: a new event's (numbered from ``first``), or a resent operation's
    (``earlier``'s, or that of the first of the batch with its op id), marked duplicate."""
    receipts: list[Receipt] = []
    position = 0
    for outcome in outcomes:
        if len(outcome) == 4:
            cls, op, reason, head = outcome
            receipts.append(Receipt(first + position, op.namespace, op.key, cls.OP, op.op, cls is not NotApplied,
                                    reason, head, op.evidence.op_id))
            position += 1
        elif outcome[0] == "dup":
            receipts.append(_as_duplicate(receipts[outcome[1]]))
        else:
            receipts.append(_as_duplicate(earlier[outcome[1]]))
    return receipts


def _check_all(ops: Sequence[Operation], before: int) -> None:
    """:class:`InvalidBatch` naming the first of ``ops`` (lines ``before + 1`` on) that could not have
    come from ``parse_operation``."""
    for n, op in enumerate(ops, before + 1):
        try:
            check_operation(op)
        except InvalidOperation as e:
            raise InvalidBatch(str(e), line=n, field=e.field) from None


def _fold_receipts(hexid: str, rows: list[tuple[Any, ...]], done: int, revision: int, state: CellState | None,
                   keys: Any, wanted: set[int], out: dict[int, Receipt]) -> tuple[int, int, CellState | None]:
    """Fold one cell's stored ``rows`` after event index ``done`` (cell revision ``revision``) into
    ``state`` (None: from its first event) and put into ``out`` the receipt of each event whose index
    is ``wanted`` (the head is the cell's right after that event, as :meth:`EventLog.receipt_at` folds
    it). Returns the index and revision where the fold stopped, and the state there."""
    cid = UUID(hexid)
    for index, _, version, topic, stored in rows:
        if index <= done:
            continue
        event = _decoded(index, topic, stored, cid, version, keys)
        if state is None:
            state = CellState(event.namespace, event.key)
        event.apply_to(state)
        done, revision = index, version
        if index in wanted:
            h = state.head
            out[index] = Receipt(index, event.namespace, event.key, event.OP, event.requested, event.applied,
                                 event.reason, None if h is None else Head(h.value, h.status), event.op_id)
    return done, revision, state


def _decoded(index: int, topic: str, state: bytes, cid: UUID, version: int, keys: Any) -> Any:
    """The event of a stored row of a cell, or :class:`StoreUnavailable` naming its index and why it
    cannot be read (a row written by a newer release, or damaged): a write to that cell, or a read of
    it from the log, cannot go on without it."""
    try:
        return decode_event(topic, state, cid, version, keys)
    except Exception as e:  # noqa: BLE001  (the codec and the library raise several kinds)
        raise _unreadable(index, cid, e) from e


def _unreadable(index: int, cid: UUID, e: Exception) -> StoreUnavailable:
    return StoreUnavailable(f"cannot read event {index} of cell {cid}: {type(e).__name__}: {_first_line(e)} "
                            "(written by a newer release, or damaged; see pmem doctor)")


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


ResendRule = Literal["operation", "fact"]
_RESENDS = threading.local()  # this thread's rule, inside strict_resends()


@contextmanager
def strict_resends(rule: ResendRule = "operation") -> Iterator[None]:
    """Within this block, on this thread, a resent op id is a duplicate only when it repeats what was
    recorded under it (key, op, value and source; ``"fact"``: key, value and source, for ingest, whose
    resent record may be decided anew, an accept then a support), else :func:`resend_conflict`. Outside,
    the op id alone decides (the library and the CLI, SPEC §4). The servers write inside it: their
    callers are several credentials. Matched where the op ids are looked up, in the write transaction."""
    _RESENDS.rule = rule
    try:
        yield
    finally:
        _RESENDS.rule = None


def resend_conflict(op: Operation) -> RetryConflict:
    """The refusal of an op id already used for another operation: it names nothing of that operation,
    which may be another credential's."""
    return RetryConflict(f"op_id {op.evidence.op_id!r} was already used for another operation in namespace "
                         f"{op.namespace!r}; a resend must repeat its operation exactly (key, op, value), "
                         "anything else needs a new op_id")


def _same_operation(op: Operation, event: CellEvent, rule: ResendRule) -> bool:
    """Whether ``op`` repeats the operation recorded as ``event``: key, source, the op (unless ``rule`` is
    "fact"), and the value when ``op`` names one (one left out was decided then: a support of the head)."""
    return ((event.key, event.source) == (op.key, op.evidence.source)
            and (rule == "fact" or event.requested == op.op) and op.value in (None, event.value_or_none))


def _runs(indices: Sequence[int], gap: int) -> Iterator[tuple[int, int]]:
    """``(first, last)`` of each run of sorted ``indices`` whose neighbours are at most ``gap`` apart."""
    start = prev = indices[0]
    for i in indices[1:]:
        if i - prev > gap:
            yield start, prev
            start = i
        prev = i
    yield start, prev


def _as_duplicate(r: Receipt) -> Receipt:
    return Receipt(r.event_index, r.namespace, r.key, r.op, r.requested, r.applied, r.reason, r.head,
                   r.op_id, duplicate=True)
