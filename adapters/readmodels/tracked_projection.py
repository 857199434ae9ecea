"""What every positioned projection shares (STYLE habit 4), on SQLite or PostgreSQL
(:mod:`pmem.adapters.storage.projection_db`).

A projection keeps one row in ``pmem_tracking``: its name, the index of the last event it applied and
the schema version of its rows. The position moves in the same transaction as the rows, so a crash or
an error rolls both back and the next catch-up resumes from the last committed batch; a batch whose
start no longer matches the stored position was applied by another process and is skipped.

A read needs only its own namespace current: :meth:`TrackedProjection.catch_up_for` folds nothing when
the events after the position belong to other namespaces (the rows of a namespace are folded from its
events alone), and otherwise waits for ``fold_lock`` (which a server shares among the stores of its
process) so that one of them folds while the others wait, bounded by the read's :class:`Until`.
"""

from __future__ import annotations

import math
import sqlite3
import threading
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from pmem.adapters.progress import Bar, Progress, silent
from pmem.adapters.readmodels import screening
from pmem.adapters.storage.projection_db import ProjectionDb, as_db
from pmem.domain.errors import StoreUnavailable
from pmem.projections.replay import IndexedEvent

TRACKING = "pmem_tracking"
WRITE_LOCK = "projections"
REBUILD_BATCH_SIZE = 20_000  # events per transaction of a rebuild's replay
# New rows after the position a read looks through for its namespace (about 10 µs a row, a fiftieth of
# folding it); a longer lag is folded without looking: nothing keeps the projection current then.
PENDING_SCAN = 10_000


class Until(Protocol):
    """When a read must stop (a server's request deadline): ``left`` seconds, and ``check``, which
    raises once none are left, naming ``what`` was not done."""

    def left(self) -> float: ...

    def check(self, what: str) -> None: ...


class NoLimit:
    """No deadline: a read outside a server."""

    def left(self) -> float:
        return math.inf

    def check(self, what: str) -> None:
        pass


NO_LIMIT = NoLimit()


def bounded(progress: Progress, until: Callable[[], Until]) -> Progress:
    """``progress``, checking the deadline ``until()`` gives as each catch-up starts and after each batch
    it commits: past it the catch-up stops between batches, its position where the last one left it."""
    def make(description: str, total: int) -> Bar:
        until().check(f"projection {description} was not caught up")
        return _BoundedBar(progress(description, total), until, description)
    return make


class _BoundedBar:
    def __init__(self, bar: Bar, until: Callable[[], Until], description: str) -> None:
        self.bar, self.until, self.description = bar, until, description

    def update(self, n: int = 1) -> object:
        self.bar.update(n)
        self.until().check(f"projection {self.description} was caught up part of the way")
        return None

    def close(self) -> None:
        self.bar.close()


class _Unappliable(Exception):
    """An event decoded but applying it raised: the batch rolls back and its namespace stops."""

    def __init__(self, stop: screening.Stop) -> None:
        super().__init__(stop.reason)
        self.stop = stop


def tracked_position(conn: ProjectionDb, name: str) -> int:
    """The position projection ``name`` records, without creating anything (0 when it has none):
    ``pmem stats`` reads it and must not write."""
    if TRACKING not in conn.names():
        return 0
    row = conn.execute(f"SELECT position FROM {TRACKING} WHERE name=?", (name,)).fetchone()
    return 0 if row is None else int(row[0])


class TrackedProjection:
    """Base of the projections: position, schema version, catch-up in batches, transactions."""

    name: str
    version: int
    rebuild_batch_size = REBUILD_BATCH_SIZE

    def __init__(self, conn: ProjectionDb | sqlite3.Connection, log: Any, projector: Any, *,
                 batch_size: int) -> None:
        self.conn = as_db(conn)
        self.log = log  # pmem.adapters.eventstore.eventlog.EventLog: indexed_events(start, stop) and last_index()
        self.batch_size = batch_size
        self.projector = projector
        self._cached_at = 0  # the position the projector's cached cells correspond to
        self._whole = False  # the projector holds every cell of the log up to _cached_at (see rebuild)
        self._batch_before = batch_size  # the catch-up batch size a rebuild restores
        self.fold_lock = threading.Lock()  # held while a read folds; a server shares one per process
        # pending_in's memory: (index, namespace) of the log's rows after _after_from up to _after_to, and
        # how many rows each namespace has among them
        self._after: tuple[deque[tuple[int, str | None]], Counter[str | None]] = (deque(), Counter())
        self._after_from = self._after_to = 0
        try:
            self.create_tables()
        except self.conn.errors as e:
            raise StoreUnavailable(f"cannot set up projection {self.name}: {e}") from e

    def create_tables(self) -> None:
        """Create what is missing; drop and recreate rows written by another schema version."""
        raise NotImplementedError

    def position(self) -> int:
        """The index of the last event applied (0 before any)."""
        row = self.conn.execute(f"SELECT position FROM {TRACKING} WHERE name=?", (self.name,)).fetchone()
        return 0 if row is None else int(row[0])

    def stored_version(self) -> int | None:
        """The schema version the stored rows were written with (None before any)."""
        row = self.conn.execute(f"SELECT version FROM {TRACKING} WHERE name=?", (self.name,)).fetchone()
        return None if row is None else int(row[0])

    def stats(self, last_index: int | None = None) -> dict[str, int]:
        last = self.log.last_index() if last_index is None else last_index
        position = self.position()
        return {"position": position, "lag": max(last - position, 0)}

    def stops(self) -> dict[str, screening.Stop]:
        """Where this projection stopped, by namespace (``""``: every namespace); see :mod:`.screening`."""
        return screening.stops(self.conn, self.name)

    def check_readable(self, namespace: str, as_of: int | None) -> None:
        """Raise :class:`~pmem.domain.errors.ProjectionStopped` when this projection stopped in
        ``namespace`` (or in every one) at or before ``as_of`` (None: now)."""
        stop = screening.blocking(self.stops(), namespace, as_of)
        if stop is not None:
            try:
                self._resume()  # the row may read now (repaired, or a newer release reads it)
            except StoreUnavailable:
                pass  # a store that cannot be written: the stop stands
            stop = screening.blocking(self.stops(), namespace, as_of)
        if stop is not None:
            raise stop.error()

    def catch_up(self, target: int | None = None, progress: Progress = silent) -> int:
        """Apply the log up to ``target`` (default: its last index); return the events applied.
        ``progress`` is told how far each committed batch moved the position. An event that cannot be
        applied stops its namespace (:mod:`.screening`); a stopped namespace whose event now reads is
        resumed first."""
        target = self.log.last_index() if target is None else target
        applied = self._resume() if screening.has_table(self.conn) else 0
        bar = progress(self.name, max(target - self.position(), 0))
        try:
            while (position := self.position()) < target:
                stop = min(position + self.batch_size, target)
                events, stop = self._screened_batch(position, stop)
                try:
                    applied += self._apply_batch(position, stop, events)
                except _Unappliable as bad:
                    self._save_stop(bad.stop)  # the batch rolled back: read it again without that namespace
                    continue
                bar.update(self.position() - position)
                if stop < min(position + self.batch_size, target):
                    break  # halted before an event whose namespace cannot be read
        finally:
            bar.close()
        return applied

    def catch_up_for(self, namespace: str, as_of: int | None = None, until: Until = NO_LIMIT,
                     progress: Progress = silent, *, wait: bool = True) -> int | None:
        """Catch up as far as a read of ``namespace`` as of ``as_of`` (None: now) needs: not at all when
        no event of that namespace lies after the position (:meth:`pending_in`), else to the end of the
        log, under ``fold_lock``: a read that finds another folding waits for it, then finds little or
        nothing left. Waiting ends at ``until``. Returns the events applied; with ``wait`` False, None
        when the fold would wait for another thread (one folds this projection or writes its file), and
        nothing is done (a point read then asks the log)."""
        last = self.log.last_index()
        if not self.pending_in(namespace, last if as_of is None else min(as_of, last)):
            return 0
        if not wait and (self.fold_lock.locked() or self.conn.write_busy()):
            return None
        return self._fold_waiting(last, until, progress)

    def _fold_waiting(self, last: int, until: Until, progress: Progress) -> int:
        while not self.fold_lock.acquire(timeout=min(until.left(), threading.TIMEOUT_MAX)):
            until.check(f"projection {self.name} was not caught up (another request was folding it)")
        try:
            return self.catch_up(last, progress)
        finally:
            self.fold_lock.release()

    def pending_in(self, namespace: str, target: int) -> bool:
        """Whether an event of ``namespace`` may lie after the position, up to ``target``: one whose row
        names it, or names none that can be read (it may be any namespace's). The namespaces of the rows
        after the position are kept, so a read looks only at rows added since the last one; more than
        :data:`PENDING_SCAN` new rows count as True without a look."""
        position = self.position()
        if position >= target:
            return False
        rows, counts = self._after
        if position < self._after_from:  # the projection went back (a rebuild): start again
            rows.clear()
            counts.clear()
            self._after_to = position
        while rows and rows[0][0] <= position:  # folded since: no longer pending
            counts[rows.popleft()[1]] -= 1
        self._after_from, self._after_to = position, max(self._after_to, position)
        if target > self._after_to:
            if target - self._after_to > PENDING_SCAN:
                return True
            for index, _, _, _, state in self.log.rows(self._after_to + 1, target, target - self._after_to):
                ns = screening.row_namespace(state)
                rows.append((index, ns))
                counts[ns] += 1
            self._after_to = target
        return counts[namespace] > 0 or counts[None] > 0

    def _screened_batch(self, start: int, stop: int) -> tuple[list[IndexedEvent], int]:
        """The events ``start+1..stop`` this projection can apply, and where the batch ends: before the
        first event whose namespace cannot be read, if any. Each new stop is saved as it is met."""
        skip = {ns: s.index for ns, s in self.stops().items()}
        events: list[IndexedEvent] = []
        for item in screening.screened(self.log, start + 1, stop, skip):
            if isinstance(item, screening.Stop):
                self._save_stop(item)
                if item.namespace == screening.EVERY_NAMESPACE:
                    return events, item.index - 1
                skip[item.namespace] = item.index
            else:
                events.append(item)
        return events, stop

    def _save_stop(self, stop: screening.Stop) -> None:
        with self._transaction():
            screening.create_table(self.conn)
            screening.save(self.conn, screening.Stop(self.name, stop.namespace, stop.index, stop.reason))

    def _resume(self) -> int:
        """Resume each stopped namespace whose stopping event can now be applied: apply its events from
        that index up to the position (in one transaction, the position unchanged) and drop the stop,
        or move it to the next event that cannot be applied. Returns the events applied."""
        applied = 0
        for ns, stop in sorted(self.stops().items()):
            rows = self.log.rows(stop.index, stop.index, 1)
            if rows and isinstance(screening.screen(rows[0])[1], screening.Stop):
                continue  # still unreadable
            if ns == screening.EVERY_NAMESPACE:
                with self._transaction():
                    screening.remove(self.conn, self.name, ns)
                continue
            applied += self._reapply(stop)
        return applied

    def _namespace_events(self, stop: screening.Stop, position: int) -> list[IndexedEvent]:
        """The events of the stopped namespace from the stop's index up to ``position``, up to the next
        one that cannot be applied (remembered for :meth:`_resumed`)."""
        events: list[IndexedEvent] = []
        self._moved: screening.Stop | None = None
        for item in screening.screened(self.log, stop.index, position, {}, only=stop.namespace):
            if isinstance(item, screening.Stop):
                self._moved = item
                break
            events.append(item)
        return events

    def _resumed(self, stop: screening.Stop, events: Sequence[IndexedEvent]) -> None:
        """Drop ``stop`` now that ``events`` are applied, or move it to the next event that cannot be
        (the caller holds the transaction)."""
        screening.remove(self.conn, self.name, stop.namespace)
        moved = self._moved
        if moved is not None:
            screening.save(self.conn, screening.Stop(self.name, moved.namespace, moved.index, moved.reason))

    def _reapply(self, stop: screening.Stop) -> int:
        position = self.position()
        events = self._namespace_events(stop, position)
        try:
            with self._transaction():
                if self.position() != position:
                    return 0  # another process moved on meanwhile: the next catch-up resumes
                self._drop_cache()
                self._seed_batch(events, stop.index - 1)
                self._apply_events(events)
                self._write_rows(self.projector.flush())
                self._resumed(stop, events)
        except _Unappliable as bad:
            self._save_stop(bad.stop)
            return 0
        finally:
            self._drop_cache()
        return len(events)

    def _apply_events(self, events: Sequence[IndexedEvent]) -> None:
        for index, event in events:
            try:
                self.projector.apply(index, event)
            except Exception as e:  # noqa: BLE001  (an event that decoded but cannot be applied)
                raise _Unappliable(screening.unappliable(index, event, e)) from e

    def _apply_batch(self, start: int, stop: int, events: Sequence[IndexedEvent]) -> int:
        """Apply ``events`` (indices ``start+1..stop``) and move the position to ``stop``, in one
        transaction. Returns 0 without writing when another process moved the position first."""
        try:
            with self._transaction():
                if self.position() != start:
                    return 0  # someone else applied this batch: the caller re-reads the position
                if self._cached_at != start:
                    self._drop_cache()
                self._seed_batch(events, start)
                self._apply_events(events)
                self._write_rows(self.projector.flush())
                forgotten = sorted({e.originator_id.hex for _, e in events if e.OP == "forget"})
                if forgotten:
                    self._forget_cells(forgotten)
                self._move_position(stop)
        except BaseException:
            self._drop_cache()
            raise
        self._cached_at = stop
        return len(events)

    def _drop_cache(self) -> None:
        self.projector.forget()
        self._cached_at = -1
        self._whole = False

    def rebuild(self, target: int | None = None, progress: Progress = silent) -> int:
        """Drop the rows and the position, create the tables again and replay the log from index 1;
        return the events applied: :func:`rebuild_together` of this projection alone. (The frontier
        projection has a parallel rebuild of its own.)"""
        return rebuild_together([self], target, progress)

    def _start_rebuild(self) -> None:
        """Empty tables and no position; ``rebuild_batch_size`` events per transaction (fewer commits,
        seed queries and key look-ups than a catch-up's batches); an empty projector that holds every
        cell it meets (``_whole``), so a cell it does not hold has no earlier event and nothing needs
        seeding from the log (:meth:`_seed_batch` may skip the query)."""
        with self._transaction():
            self._drop()
            self._create()
            screening.remove(self.conn, self.name)
        self.projector.forget()
        self._cached_at, self._whole = 0, True
        self._batch_before, self.batch_size = self.batch_size, max(self.batch_size, self.rebuild_batch_size)

    def _end_rebuild(self) -> None:
        self.batch_size, self._whole = self._batch_before, False

    def _applied_whole(self, start: int, stop: int, events: Sequence[IndexedEvent]) -> bool:
        """Apply a batch a shared rebuild read (:func:`rebuild_together`); False when it was not: an
        event this projection cannot apply (rolled back; its own catch-up meets it again and stops its
        namespace) or another process moved the position."""
        try:
            self._apply_batch(start, stop, events)
        except _Unappliable:
            return False
        return self.position() == stop

    def _drop(self) -> None:
        """Drop this projection's tables and forget its position (the caller holds the transaction)."""
        raise NotImplementedError

    def _create(self) -> None:
        """Create this projection's tables (the caller holds the transaction)."""
        raise NotImplementedError

    def _seed_batch(self, events: Sequence[IndexedEvent], start: int) -> None:
        """Give the projector the state, as of ``start``, of the batch's cells it does not hold."""
        raise NotImplementedError

    def _write_rows(self, rows: Any) -> None:
        """Write what the projector flushed (the caller holds the transaction)."""
        raise NotImplementedError

    def _forget_cells(self, cells: list[str]) -> None:
        """Scrub what the rows written so far still hold of these forgotten cells' values, texts and
        sources (the caller holds the transaction; docs/forgetting.md). Nothing by default."""

    def _move_position(self, stop: int) -> None:
        self.conn.execute(self.conn.upsert(TRACKING, ("name", "position", "version"), ("name",)),
                          (self.name, stop, self.version))

    def _create_tracking(self) -> None:
        self.conn.execute(f"CREATE TABLE IF NOT EXISTS {TRACKING} (name TEXT PRIMARY KEY, "
                          f"position {self.conn.int_type} NOT NULL, version {self.conn.int_type} NOT NULL)")

    def _forget_position(self) -> None:
        self.conn.execute(f"DELETE FROM {TRACKING} WHERE name=?", (self.name,))

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """One write transaction, taken with the write lock up front (on PostgreSQL: one advisory lock
        for every projection of the schema, as SQLite has one writer per file: a rebuild's DROP then
        never meets another process's batch half-way). Driver errors become :class:`StoreUnavailable`."""
        try:
            with self.conn.write(WRITE_LOCK):
                yield
        except self.conn.errors as e:
            raise StoreUnavailable(f"cannot update projection {self.name}: {e}") from e


def rebuild_together(projections: Sequence[TrackedProjection], target: int | None = None,
                     progress: Progress = silent) -> int:
    """Rebuild these projections (of one log, in one database) from index 1 in one pass: each batch of
    the log is read and decoded once, which is most of a replay's cost, and applied to each projection
    in a transaction of its own. A batch with an event that cannot be read, or that one of them cannot
    apply, ends the shared pass: each then catches up alone from its own position
    (:meth:`TrackedProjection.catch_up`, which stops that event's namespace). Returns the events each
    applied (the most of any)."""
    target = projections[0].log.last_index() if target is None else target
    for p in projections:
        p._start_rebuild()
    try:
        shared = _shared_pass(projections, target, progress)
        return max(n + (p.catch_up(target, progress) if p.position() < target else 0)
                   for n, p in zip(shared, projections, strict=True))
    finally:
        for p in projections:
            p._end_rebuild()


def _shared_pass(projections: Sequence[TrackedProjection], target: int, progress: Progress) -> list[int]:
    """Batches read once and applied to every projection, while all goes well; the events each applied."""
    applied = [0] * len(projections)
    log, size = projections[0].log, projections[0].batch_size
    bar = progress("+".join(p.name for p in projections), target)
    position = 0
    try:
        while position < target:
            stop = min(position + size, target)
            events = _readable(screening.screened(log, position + 1, stop, {}))
            if events is None:
                break
            for i, p in enumerate(projections):
                if not p._applied_whole(position, stop, events):
                    return applied
                applied[i] += len(events)
            bar.update(stop - position)
            position = stop
    finally:
        bar.close()
    return applied


def _readable(items: Iterator[IndexedEvent | screening.Stop]) -> list[IndexedEvent] | None:
    """The events, or None at the first one that cannot be read."""
    out: list[IndexedEvent] = []
    for item in items:
        if isinstance(item, screening.Stop):
            return None
        out.append(item)
    return out
