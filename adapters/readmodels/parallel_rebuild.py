"""The full rebuild of the frontier tables on SQLite: the log split by cell id, folded on every core.

The cells are split into ranges of cell id (ids are uniform hex, so the ranges hold about as many
events each): one range per ``rebuild_chunk`` events of the log, as many for each process. A range is
read in one query streamed from its cursor (:func:`read_range`): a scan of the table while there are
few ranges, its rows grouped by cell in memory (grouping is cheaper than sorting), or past
``SCAN_RANGES`` the (cell, revision) index, its rows taken a cell at a time as they come
(:func:`by_cell`). Either way the rows a process holds are bounded, whatever the length of the log:
a range's (``rebuild_chunk`` events) or one cell's. Each cell is folded
(:func:`pmem.projections.frontier_rebuild.fold_cell`: final rows only) and written in primary-key
order with multi-row ``INSERT`` statements (the driver's cost is per statement, not per row).

A range is written in pieces of whole cells (``PIECE_EVENTS``), each in a write transaction of its own
(:func:`fold_ranges`); a process holds at most ``MAX_QUEUED`` folded pieces. With more than one worker,
the calling process folds the first share of the ranges and ``workers - 1`` new processes fold the
others, every process writing into the shadow tables. SQLite has one writer at a time and its lock is
not fair (a waiter sleeps through the other's transactions), so a process that still has cells to fold
only tries the lock and otherwise queues the piece and folds the next; one that has folded everything
writes its queue and, while another holds the lock, checkpoints the WAL (:func:`checkpointer`). The
workers are new interpreters (``python -P -m pmem.adapters.readmodels.parallel_rebuild JOB``): a forked
child would inherit the caller's SQLite connections and locks, and ``multiprocessing``'s spawn would run
the caller's main script again. The cyclic garbage collector is off while a rebuild runs
(:func:`no_gc`). The measurements behind each of these choices, and the designs they ruled out, are in
docs/projections.md.

A worker dies with the process that started it (:func:`die_with_parent`): its stdin is a pipe the
parent holds open and never writes, and a thread of the worker ends the process (``os._exit``) when
the pipe reaches end of file, which happens when the parent exits, however it dies (SIGKILL
included); on Linux the worker also asks the kernel for SIGKILL when its parent goes
(``PR_SET_PDEATHSIG``), which needs no thread to be scheduled. A killed rebuild thus leaves no
process writing into the store; what it leaves, its shadow tables, the next rebuild drops first.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import stat
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import chain, groupby
from operator import itemgetter
from typing import Any

import orjson

from pmem.adapters.eventstore import codec
from pmem.adapters.eventstore.gc_pause import no_gc
from pmem.adapters.eventstore.sealing import SEALED, Keyring, open_with
from pmem.adapters.eventstore.stored_log import (
    SCAN_RANGES,
    CellRange,
    RawRow,
    range_keys,
    read_only,
    select_keys,
)
from pmem.adapters.eventstore.stored_log import SQL as LOG_SQL
from pmem.adapters.readmodels import screening
from pmem.adapters.storage.projection_db import ProjectionDb
from pmem.domain.errors import ProjectionStopped, StoreUnavailable
from pmem.projections.frontier import TABLES
from pmem.projections.frontier_rebuild import CellRows, StoredEvent, fold_cell

LOCK_TIMEOUT = 60.0  # seconds a worker waits for the write lock (as the projection's own connection)
PIECE_EVENTS = 20_000  # events folded per write transaction (a range is written in pieces)
MAX_QUEUED = 2  # folded pieces a process holds while another writes; past them it waits for the write lock
PARAMETERS_PER_STATEMENT = 900  # under SQLite's old limit of 999 bound parameters per statement
PR_SET_PDEATHSIG = 1  # prctl(2) option (linux/prctl.h): the signal a process gets when its parent exits
ORPHANED = 3  # exit status of a worker that found its parent gone (no one reads it: the parent is gone)


def cell_ranges(count: int) -> list[CellRange]:
    """``count`` ranges of cell id covering every id, in order (ids are 32 hex digits)."""
    bounds = [f"{i * (1 << 128) // count:032x}" for i in range(count)]
    return [(lo, hi) for lo, hi in zip(["", *bounds[1:]], [*bounds[1:], None], strict=True)]


def fold_pieces(rows: Iterable[RawRow], piece: int, keys: Any = None, in_cell_order: bool = False
                ) -> Iterator[CellRows]:
    """The final rows of the cells whose stored rows these are (each cell's in revision order), in
    primary-key order, in pieces of whole cells and at least ``piece`` events (the last one smaller).
    A cell's stored rows are let go once it is folded (:func:`by_cell`)."""
    decode = _decoder(keys)
    drop = keys.drop if keys is not None else None
    out = CellRows()
    for cid, cell_rows in by_cell(rows, in_cell_order):
        try:
            fold_cell(cid, decode(cell_rows), out)
        except Exception as e:
            raise _unappliable(cell_rows, e, keys) from e
        finally:
            if drop is not None:
                drop((cid,))  # its cipher (a rebuild folds a cell once): the cache stays small
        if out.events >= piece:
            yield out
            out = CellRows()
    if out.events:
        yield out


def by_cell(rows: Iterable[RawRow], in_cell_order: bool = False) -> Iterator[tuple[str, list[RawRow]]]:
    """Each cell's id and stored rows, the cells in id order. Rows read in cell order (through the
    log's (cell, revision) index) are taken a cell at a time as they come: only that cell's are held.
    Rows in any other order (a scan in storage order) are all grouped in memory first (grouping costs
    a third of sorting), and each cell's let go once taken."""
    if in_cell_order:
        last = ""
        for cid, group in groupby(rows, itemgetter(1)):
            if cid <= last:
                raise RuntimeError(f"the rows of cell {cid} were read out of cell order")
            last = cid
            yield cid, list(group)
        return
    cells: dict[str, list[RawRow]] = {}
    for row in rows:
        found = cells.get(row[1])
        if found is None:
            cells[row[1]] = [row]
        else:
            found.append(row)
    for cid in sorted(cells):
        yield cid, cells.pop(cid)


def read_range(conn: sqlite3.Connection, cells: CellRange, stop: int, ranges: int) -> Iterator[RawRow]:
    """The stored rows with index ``<= stop`` of a range of cells (one of ``ranges``), streamed from the
    cursor rather than fetched at once, so that rows read in cell order are held a cell at a time."""
    return iter(conn.execute(*LOG_SQL.log.range_rows(cells, stop, ranges)))


def in_cell_order(ranges: int) -> bool:
    """Whether a log read in ``ranges`` ranges is read in cell order (through the index, past
    :data:`SCAN_RANGES`: :meth:`pmem.adapters.eventstore.log_sql.EventQueries.range_rows`)."""
    return ranges > SCAN_RANGES


def fold_rows(rows: list[RawRow], keys: Any = None) -> CellRows:
    """:func:`fold_pieces` in one piece."""
    return next(fold_pieces(rows, 1 << 62, keys), CellRows())


def insert_rows(conn: ProjectionDb | sqlite3.Connection, name: str, table: str,
                rows: Sequence[tuple[Any, ...]]) -> None:
    """Insert ``rows`` of ``table`` (column order of :data:`TABLES`) into ``name``, many per statement."""
    width = len(TABLES[table][0])
    per = max(1, PARAMETERS_PER_STATEMENT // width)
    one = f"({','.join('?' * width)})"
    flat = list(chain.from_iterable(rows))
    whole = len(rows) // per * per
    if whole:
        step = per * width
        conn.executemany(f"INSERT INTO {name} VALUES {','.join([one] * per)}",
                         (flat[i:i + step] for i in range(0, whole * width, step)))
    if len(rows) > whole:
        conn.execute(f"INSERT INTO {name} VALUES {','.join([one] * (len(rows) - whole))}", flat[whole * width:])


def write_rows(conn: ProjectionDb | sqlite3.Connection, out: CellRows, suffix: str = "") -> None:
    for table, rows in out.rows.items():
        if rows:
            insert_rows(conn, table + suffix, table, rows)


def fold_ranges(ranges: Sequence[CellRange], read: Callable[[CellRange], Iterable[RawRow]],
                write: Callable[[CellRows, float], bool], piece: int = PIECE_EVENTS,
                done: Callable[[int], Any] = lambda events: None,
                idle: Callable[[], bool] = lambda: False, keys: Any = None, ordered: bool = False) -> int:
    """Fold each range's rows (``read``) in pieces of at least ``piece`` events and write the pieces in
    order with ``write(rows, wait)``, which gives up (False) when another process holds the write
    lock for ``wait`` seconds. While folding, a write does not wait: the piece stays queued and the
    next one folds, so a process never sleeps on the lock while it has work. Once everything is
    folded, the queue is written; while another process holds the lock, ``idle`` runs first (a
    checkpoint of the WAL, :func:`checkpointer`), again while it says so, and then the write waits.
    A process holds at most :data:`MAX_QUEUED` pieces: past them it waits for the lock while folding
    too. ``done`` gets each piece's event count once it is written. ``keys``: the keyring sealed fields
    are opened with (``read`` caches the range's keys in it). ``ordered``: ``read`` gives the rows in
    cell order (:func:`by_cell`). Returns the events folded."""
    events = 0
    queue: deque[CellRows] = deque()
    for cells in ranges:
        for out in fold_pieces(read(cells), piece, keys, ordered):
            queue.append(out)
            events += out.events
            while queue and write(queue[0], 0.0):
                done(queue.popleft().events)
            if len(queue) > MAX_QUEUED:  # folded rows held in memory: bounded, so wait for the lock
                _write_waiting(queue[0], write)
                done(queue.popleft().events)
    while queue:
        if not write(queue[0], 0.0):
            if idle():
                continue
            _write_waiting(queue[0], write)
        done(queue.popleft().events)
    return events


def _write_waiting(out: CellRows, write: Callable[[CellRows, float], bool]) -> None:
    if not write(out, LOCK_TIMEOUT):
        raise sqlite3.OperationalError(f"database is locked: no write lock within {LOCK_TIMEOUT:.0f} s")


def write_piece(conn: sqlite3.Connection, out: CellRows, suffix: str, wait: float) -> bool:
    """Write ``out`` into the tables ``table + suffix`` in one transaction, if the write lock comes
    within ``wait`` seconds (False: nothing written, another process holds it)."""
    conn.execute(f"PRAGMA busy_timeout={int(wait * 1000)}")
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as e:
        if conn.in_transaction or "locked" not in str(e):
            raise
        return False
    try:
        write_rows(conn, out, suffix)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return True


def checkpointer(conn: sqlite3.Connection) -> Callable[[], bool]:
    """What a process that has folded everything does while another holds the write lock: copy what
    it can of the WAL into the database file (``PASSIVE``: it never waits for a lock). A rebuild's
    writers do not checkpoint after each commit (``wal_autocheckpoint`` 0). Each call says whether
    to call again before waiting for the lock: frames are left to copy and this call copied some (a
    reader's snapshot can hold frames back; then there is nothing to gain by trying at once)."""
    last = -1

    def checkpoint() -> bool:
        nonlocal last
        busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        progressed, last = copied != last, copied
        return bool(busy == 0 and frames > copied and progressed)

    return checkpoint


def fold_into_store(store: str, ranges: list[CellRange], stop: int, total: int, suffix: str,
                    piece: int = PIECE_EVENTS) -> int:
    """In a worker process: fold ``ranges`` (of the ``total`` the log is read in) and write their rows
    into the tables ``table + suffix`` of the store, one write transaction per piece of at least
    ``piece`` events (:func:`fold_ranges`). Returns the events folded."""
    src = read_only(store)
    dst = sqlite3.connect(store, isolation_level=None)
    keys = Keyring(store, lambda cells: select_keys(src, cells))

    def read(cells: CellRange) -> Iterator[RawRow]:
        keys.absorb(range_keys(src, cells))
        return read_range(src, cells, stop, total)

    try:
        dst.execute("PRAGMA synchronous=NORMAL")  # as the projection's own connection (WAL: no sync per commit)
        dst.execute("PRAGMA wal_autocheckpoint=0")
        with no_gc():
            return fold_ranges(ranges, read, lambda out, wait: write_piece(dst, out, suffix, wait), piece,
                               idle=checkpointer(dst), keys=keys, ordered=in_cell_order(total))
    finally:
        src.close()
        dst.close()


def start_worker(store: str, ranges: list[CellRange], stop: int, total: int, suffix: str,
                 piece: int) -> subprocess.Popen[bytes]:
    """A process that runs :func:`fold_into_store` on this job (``python -m`` this module, the job as its
    argument: nothing of the caller's program is imported again, as ``multiprocessing`` would). ``-P``
    keeps the current folder off ``sys.path``: it may hold another copy of the package."""
    job = orjson.dumps({"store": store, "ranges": ranges, "stop": stop, "total": total, "suffix": suffix,
                        "piece": piece})
    return subprocess.Popen([sys.executable, "-P", "-m", __name__, job.decode()], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finish_worker(proc: subprocess.Popen[bytes]) -> int:
    """The events the worker folded, once it has ended; its one-line error if it failed. The worker's
    stdin stays open until it has ended (``communicate`` would close it first, and a worker takes the
    end of its stdin for its parent's death, :func:`die_with_parent`)."""
    parent_pipe, proc.stdin = proc.stdin, None
    try:
        out, err = proc.communicate()
    finally:
        if parent_pipe is not None:
            parent_pipe.close()
    if proc.returncode != 0:
        lines = err.decode(errors="replace").strip().splitlines() or [f"exit status {proc.returncode}"]
        stopped = f"{ProjectionStopped.__name__}: "
        if lines[-1].startswith(stopped):  # an event it cannot apply: the same error as in this process
            raise ProjectionStopped(lines[-1][len(stopped):])
        raise StoreUnavailable(f"a rebuild worker process failed: {lines[-1]}")
    return int(out)


def stop_workers(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


def die_with_parent(fd: int = 0) -> None:
    """In a worker: end this process when the process that started it ends. ``fd`` (stdin) is a pipe
    whose other end only the parent holds (:func:`start_worker`; the pipe is close-on-exec, so no
    other program the parent starts holds it): when the parent exits, by any death, the kernel closes that end and a
    read here returns end of file, and a daemon thread then ends the process at once (``os._exit``:
    no cleanup, an open transaction rolls back as after any kill). Where the parent died before the
    thread started, the first read already returns end of file. On Linux the kernel is also asked for
    SIGKILL at the parent's death (``PR_SET_PDEATHSIG``), which needs no thread to run (the signal
    follows the *thread* that started the worker, which waits for the worker in
    :func:`finish_worker`). Elsewhere, or where ``prctl`` is missing, the pipe alone does; a ``fd``
    that is not a pipe (closed, a terminal, ``/dev/null``: the module run by hand) leaves the worker
    unwatched rather than ending it."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass
    threading.Thread(target=_exit_at_end_of_file, args=(fd,), name="parent-death", daemon=True).start()


def _exit_at_end_of_file(fd: int) -> None:
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return
        while os.read(fd, 4096):
            pass  # the parent never writes: anything read is ignored
    except OSError:
        return  # nothing to watch: stay alive
    os._exit(ORPHANED)


def split(ranges: list[CellRange], parts: int) -> list[list[CellRange]]:
    """``ranges`` in ``parts`` contiguous shares, as equal as they go."""
    size, extra = divmod(len(ranges), parts)
    out, start = [], 0
    for i in range(parts):
        end = start + size + (i < extra)
        out.append(ranges[start:end])
        start = end
    return out


@contextmanager
def pragmas(conn: sqlite3.Connection, **values: Any) -> Iterator[None]:
    """These PRAGMAs of ``conn`` set for the block (a value of None: only restored after it), then
    set back to what they were."""
    before = {name: conn.execute(f"PRAGMA {name}").fetchone()[0] for name in values}
    try:
        for name, value in values.items():
            if value is not None:
                conn.execute(f"PRAGMA {name}={value}")
        yield
    finally:
        for name, value in before.items():
            conn.execute(f"PRAGMA {name}={value}")


def _decoder(keys: Any = None) -> Callable[[list[RawRow]], list[StoredEvent]]:
    """Decode the stored rows of one cell into ``(event index, revision, event class, fields)`` with the
    one codec (:mod:`pmem.adapters.eventstore.codec`), sealed fields opened with ``keys``. A row at the
    current class version is decoded inline (a rebuild does this a million times: a call per row
    costs more than the rest of the loop), its sealed fields opened with the cell's key, taken once
    per cell (:func:`~pmem.adapters.eventstore.sealing.open_with`); any other row, and any that does
    not parse, goes through ``decode_fields`` (upcasting, or its one-line error), and a sealed field
    that key does not open through the keyring (another life, a forgotten key)."""
    classes = codec.event_classes()  # eventsourcing: not loaded by a process that only reads
    current, loads, opened = codec.CLASS_VERSION, orjson.loads, codec.opened
    takes = keys is not None and hasattr(keys, "take")

    def decode(rows: list[RawRow]) -> list[StoredEvent]:
        out: list[StoredEvent] = []
        key, fresh = None, takes
        for index, cell, revision, topic, state in rows:
            cls: Any = classes.get(topic)
            try:
                fields = loads(state)
            except orjson.JSONDecodeError:
                cls = None
            if cls is None or fields.pop("class_version", 1) != current:
                cls, fields = codec.event_class(topic), codec.decode_fields(topic, state, cell, revision, keys)
            elif SEALED in fields:
                if fresh:
                    key, fresh = keys.take(cell), False
                if not open_with(key, fields, cell, revision):
                    opened(topic, fields, cell, revision, keys)
            elif cls.OP == "forget":
                opened(topic, fields, cell, revision, keys)
                key, fresh = None, False  # the key is gone: later lives go through the keyring
            out.append((index, revision, cls, fields))
        return out

    return decode


def _unappliable(rows: list[RawRow], e: Exception, keys: Any) -> Exception:
    """The error for a cell whose rows did not fold: :class:`ProjectionStopped` naming the first row
    that cannot be applied (:mod:`.screening`), or ``e`` itself when every row reads."""
    for row in rows:
        found = screening.screen(row, keys)[1]
        if isinstance(found, screening.Stop):
            return screening.Stop("frontier", found.namespace, found.index, found.reason).error()
    return e


def main() -> None:
    """A worker process: the job (JSON) as the argument, the events folded on stdout, or one line on
    stderr and exit status 1; it ends at once when its parent does (:func:`die_with_parent`)."""
    die_with_parent()
    try:
        job = orjson.loads(sys.argv[1])
        events = fold_into_store(job["store"], [(lo, hi) for lo, hi in job["ranges"]], job["stop"],
                                 job["total"], job["suffix"], job["piece"])
    except Exception as e:  # noqa: BLE001  (any failure is reported to the parent as one line)
        print(f"{type(e).__name__}: {e}".replace("\n", " "), file=sys.stderr)
        sys.exit(1)
    print(events)


if __name__ == "__main__":
    main()
