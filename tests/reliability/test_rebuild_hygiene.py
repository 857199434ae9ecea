"""A killed ``pmem rebuild`` leaves nothing behind that harms the next one.

The frontier's full rebuild on SQLite folds the log over worker processes that write into shadow
tables (``*__rebuild``). Killing the rebuilding process must take its workers with it; a rebuild
must start by dropping whatever shadow tables a killed one left; and a worker of an earlier rebuild
that is somehow still running must not be able to write into the new rebuild's shadow tables.
Real SQLite files and real processes; several workers are forced on a small log
(``rebuild_workers``, ``parallel_from``, ``rebuild_chunk``).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import pmem
from pmem.adapters.readmodels import sqlite_projection
from tests.integration.test_projection import dump, fresh_sqlite, write_log
from tests.reliability.conftest import PMEM_BIN, REPO, child_env

WORKER_MODULE = "pmem.adapters.readmodels.parallel_rebuild"
GONE_WITHIN_S = 5.0
START_TIMEOUT_S = 60.0

# The real CLI (``pmem --db DB rebuild``, the installed entry point run as its own main script) with
# several workers forced on a small log: there is no setting for these, so the driver sets them on
# every FrontierProjection the CLI opens.
DRIVER = """
import runpy, sys
from pmem.adapters.readmodels import sqlite_projection as sp
init = sp.FrontierProjection.__init__
def forced(self, *args, **kwargs):
    init(self, *args, **kwargs)
    self.rebuild_workers, self.parallel_from, self.rebuild_chunk = 3, 0, 50
sp.FrontierProjection.__init__ = forced
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""

pytestmark = pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="finds processes through /proc")


def shadow_tables(db: Path | str) -> list[str]:
    """Every table whose name says it is (or was) a rebuild's shadow table."""
    conn = sqlite3.connect(db)
    try:
        return [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE name LIKE '%rebuild%'")]
    finally:
        conn.close()


def stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state first), None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def alive(pid: int) -> bool:
    """Running (a zombie is dead: its parent, pid 1 here, may not have reaped it yet)."""
    fields = stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def rebuild_workers(store: str) -> list[int]:
    """Live processes whose command line runs the rebuild worker module on ``store``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if WORKER_MODULE.encode() in argv and any(store.encode() in arg for arg in argv) and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def wait_for(check: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while not (result := check()) and time.monotonic() < deadline:
        time.sleep(0.02)
    return result


def test_killing_a_rebuild_takes_its_worker_processes_with_it(tmp_path: Path) -> None:
    """SIGKILL ``pmem rebuild`` while its workers run: each is gone within a few seconds. The workers
    are held mid-rebuild by a write lock this test takes (they have folded their share and wait up to
    a minute for the lock), so a worker that outlives its parent is still there when looked for."""
    db = tmp_path / "mem.db"
    with pmem.open(db) as store:
        write_log(store, 3_000, seed=11)
        store.catch_up()
    stderr = tmp_path / "rebuild.err"
    with stderr.open("wb") as err:
        parent = subprocess.Popen([sys.executable, "-c", DRIVER, PMEM_BIN, "--db", str(db), "rebuild",
                                   "--projection", "frontier"], stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=err, cwd=REPO, env=child_env())
    lock = sqlite3.connect(db, timeout=START_TIMEOUT_S, isolation_level=None)
    workers: list[int] = []
    try:
        wait_for(lambda: len(rebuild_workers(str(db))) == 2 or parent.poll() is not None, START_TIMEOUT_S)
        workers = rebuild_workers(str(db))
        assert parent.poll() is None, f"the rebuild ended before it was killed: {stderr.read_text()}"
        assert len(workers) == 2, workers
        lock.execute("BEGIN IMMEDIATE")
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        left = wait_for(lambda: not any(map(alive, workers)), GONE_WITHIN_S)
        assert left, f"rebuild workers outlived their parent: {[p for p in workers if alive(p)]}"
    finally:
        if lock.in_transaction:
            lock.execute("ROLLBACK")
        lock.close()
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        for pid in workers:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    # what the killed rebuild left (shadow tables) does not stop the next one
    with pmem.open(db) as store:
        projection = store.frontier_projection
        projection.rebuild_workers, projection.parallel_from, projection.rebuild_chunk = 2, 0, 50
        assert projection.rebuild() == 3_000
        assert dump(store.projection_db) == dump(fresh_sqlite(store).conn)
    assert shadow_tables(db) == []


def test_a_rebuild_drops_every_stale_shadow_table_first(tmp_path: Path) -> None:
    """Shadow tables a killed rebuild left, under any rebuild's name (this version's or an earlier
    one's, of a table the schema no longer has), rows and all: the next rebuild succeeds, leaves
    none, and its rows are the fold of the log."""
    db = tmp_path / "mem.db"
    with pmem.open(db) as store:
        write_log(store, 400, seed=12)
        store.catch_up()
        conn = store.projection_db
        conn.execute("CREATE TABLE cells__rebuild AS SELECT * FROM cells")  # an earlier version's name
        conn.execute("CREATE TABLE cells__0badc0de__rebuild AS SELECT * FROM cells")
        conn.execute("CREATE TABLE versions__0badc0de__rebuild AS SELECT * FROM versions")
        conn.execute("CREATE TABLE edges_v1__rebuild (x)")
        conn.execute("CREATE INDEX edges_v1__rebuild_x ON edges_v1__rebuild(x)")
        projection = store.frontier_projection
        projection.rebuild_workers, projection.parallel_from, projection.rebuild_chunk = 2, 0, 50
        assert projection.rebuild() == 400
        assert dump(store.projection_db) == dump(fresh_sqlite(store).conn)
    assert shadow_tables(db) == []


class StaleWorkerOnFirstRead:
    """The real log; just before the rebuilding process reads its first range of cells, a worker of an
    earlier rebuild (its job: ``suffix`` and ``piece``, as that rebuild started it) folds the same
    range and tries to write it, as a worker left running by a killed rebuild would."""

    def __init__(self, log: Any, db: Path, suffix: str, piece: int) -> None:
        self.log, self.db, self.suffix, self.piece = log, str(db), suffix, piece
        self.stale: subprocess.Popen[bytes] | None = None
        self.stale_err = b""

    def last_index(self) -> int:
        return int(self.log.last_index())

    @property
    def keys(self) -> Any:  # the data keys sealed fields are opened with
        return self.log.keys

    def load_keys(self, cells: Any) -> None:
        """Called just before the rebuilding process reads a range (its rows come from the file)."""
        if self.stale is None:
            self.stale = sqlite_projection.start_worker(self.db, [cells], self.last_index(), 1, self.suffix,
                                                        self.piece)
            self.stale.wait(START_TIMEOUT_S)  # stdin (the parent's pipe, where there is one) stays open
            assert self.stale.stderr is not None
            self.stale_err = self.stale.stderr.read()
        self.log.load_keys(cells)

    def rows(self, start: int, stop: int | None, limit: int) -> Any:
        return self.log.rows(start, stop, limit)

    def indexed_events(self, start: int = 1, stop: int | None = None) -> Any:
        return self.log.indexed_events(start, stop)

    def rows_of_cells(self, cells: Any, stop: int, ranges: int) -> Any:
        return self.log.rows_of_cells(cells, stop, ranges)


def test_a_worker_of_an_earlier_rebuild_cannot_write_into_the_next_ones_shadow_tables(tmp_path: Path) -> None:
    db = tmp_path / "mem.db"
    with pmem.open(db) as store:
        write_log(store, 400, seed=13)
        store.catch_up()
        want = dump(fresh_sqlite(store).conn)
        projection = store.frontier_projection
        projection.rebuild_workers, projection.parallel_from, projection.rebuild_chunk = 2, 0, 50
        assert projection.rebuild() == 400  # the earlier rebuild, with its worker: its shadow tables are gone
        # That rebuild's job as its worker got it: a suffix of its own (every rebuild draws one) and a piece.
        suffix, piece = sqlite_projection.shadow_suffix(), sqlite_projection.MIN_PIECE_EVENTS
        log = projection.log
        stale = StaleWorkerOnFirstRead(log, db, suffix, piece)
        projection.log = stale
        try:
            assert projection.rebuild() == 400
        finally:
            projection.log = log
            if stale.stale is not None and stale.stale.poll() is None:
                stale.stale.kill()
                stale.stale.wait()
        assert stale.stale is not None and stale.stale.returncode != 0, "the stale worker wrote its rows"
        assert b"no such table" in stale.stale_err
        assert dump(store.projection_db) == want
    assert shadow_tables(db) == []
