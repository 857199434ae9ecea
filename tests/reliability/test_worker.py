"""``pmem worker`` as an operator runs it: killed mid-batch, stopped by signal, racing readers.

Every check ends the same way: the rows the worker (and any reader) left behind equal a rebuild of
the projection from index 1, compared as sorted row lists, so a batch applied twice (a support count
bumped twice) or an event skipped shows up as a difference.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import pmem
from pmem.adapters.readmodels.registry import PROJECTION_NAMES
from tests.reliability.conftest import PMEM_BIN, REPO, child_env, new_store_url
from tests.reliability.tables import projection_rows, rebuild_vector_tables
from tests.reliability.workers import random_operation

KILLS = 8
BATCH = 200
KILL_AFTER_S = (0.02, 0.3)  # after the worker reported its first batch
TOP_UP = 5_000  # events appended before a kill when the worker has nothing left to do
TIMEOUT_S = 120


class Worker:
    """``pmem worker`` in a child process, its stdout (JSON lines) drained by a thread."""

    def __init__(self, db: str, projection: str, *args: str) -> None:
        self.lines: list[dict[str, Any]] = []
        self.first_batch = threading.Event()
        self.proc = subprocess.Popen([PMEM_BIN, "--db", db, "worker", "--projection", projection, *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                                     env=child_env())
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.endswith("\n"):
                self.lines.append(json.loads(line))
                self.first_batch.set()

    def stop(self, sig: int = signal.SIGTERM) -> int:
        self.proc.send_signal(sig)
        rc = self.proc.wait(timeout=TIMEOUT_S)
        self._reader.join(timeout=10)
        return rc

    def stderr(self) -> str:
        assert self.proc.stderr is not None
        return self.proc.stderr.read()


def write_ops(store: pmem.Store, n: int, rng: random.Random, prefix: str, keys: int = 2_000) -> None:
    ops = []
    for i in range(n):
        d = random_operation(rng, f"{prefix}-{i}")
        d["key"] = f"{d['key']}_{rng.randrange(keys)}"
        ops.append(d)
    for start in range(0, n, 5_000):
        store.apply(ops[start:start + 5_000])


def wait_caught_up(db: str, names: tuple[str, ...], worker: Worker) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        assert worker.proc.poll() is None, f"the worker exited {worker.proc.returncode}: {worker.stderr()}"
        with pmem.open(db) as store:
            projections = store.stats()["projections"]
        # The worker's own heartbeat first: a projection already caught up says nothing about a
        # worker that may still be starting (and not yet handling SIGTERM).
        started = all(projections[n].get("worker", {}).get("pid") == worker.proc.pid for n in names)
        if started and all(projections[n]["lag"] == 0 for n in names):
            return
        time.sleep(0.1)
    pytest.fail(f"the worker did not catch up with {names} in {TIMEOUT_S} s")


def rows_equal_a_rebuild(db: str, *, vectors: bool = False) -> None:
    """The rows now equal a rebuild (a projection no worker followed is caught up here first)."""
    with pmem.open(db) as store:
        store.catch_up()
        live = projection_rows(store, vectors=vectors)
        store.rebuild("frontier")
        store.rebuild("graph")
        if vectors:
            rebuild_vector_tables(store)
        rebuilt = projection_rows(store, vectors=vectors)
    assert live["cells"], "the comparison saw no rows"
    for table in live:
        assert live[table] == rebuilt[table], f"table {table} differs from a rebuild"


@pytest.mark.parametrize("projection", ["frontier", "graph"])
def test_a_worker_killed_in_the_middle_of_batches_resumes_with_no_duplicates_and_no_gaps(
        backend: str, projection: str, tmp_path: Path) -> None:
    db = new_store_url(backend, tmp_path)
    rng = random.Random(7)
    with pmem.open(db) as store:
        write_ops(store, 20_000, rng, "w0")
    busy_at_kill = 0
    for kill in range(KILLS):
        with pmem.open(db) as store:
            if store.projections[projection].position() == store.last_index():
                write_ops(store, TOP_UP, rng, f"w{kill + 1}")
        worker = Worker(db, projection, "--batch-size", str(BATCH))
        assert worker.first_batch.wait(TIMEOUT_S), worker.stop(signal.SIGKILL) and worker.stderr()
        time.sleep(rng.uniform(*KILL_AFTER_S))
        assert worker.proc.poll() is None, worker.stderr()
        worker.stop(signal.SIGKILL)
        with pmem.open(db) as store:
            position, last = store.projections[projection].position(), store.last_index()
            assert integrity_ok(store)
            worker_row = store.stats()["projections"][projection]["worker"]
        assert position % BATCH == 0 or position == last, f"kill {kill}: position {position} is mid-batch"
        assert not worker_row["alive"], f"kill {kill}: a killed worker reads as alive: {worker_row}"
        busy_at_kill += position < last
    assert busy_at_kill >= KILLS // 2, f"only {busy_at_kill} of {KILLS} kills found the worker with work left"
    worker = Worker(db, projection)
    wait_caught_up(db, (projection,), worker)
    assert worker.stop() == 0
    rows_equal_a_rebuild(db)


def integrity_ok(store: pmem.Store) -> bool:
    from tests.reliability.conftest import integrity_check

    return integrity_check(store) == "ok"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_worker_cleanly_and_a_restart_resumes_where_it_stopped(
        backend: str, sig: int, tmp_path: Path) -> None:
    db = new_store_url(backend, tmp_path)
    names = PROJECTION_NAMES  # every projection, the lexical one included
    rng = random.Random(sig)
    with pmem.open(db) as store:
        write_ops(store, 300, rng, "a", keys=50)
    worker = Worker(db, "all", "--interval", "0.05", "--batch-size", "40")
    wait_caught_up(db, names, worker)
    with pmem.open(db) as store:
        assert all(store.stats()["projections"][n]["worker"]["alive"] for n in names)
        write_ops(store, 200, rng, "b", keys=50)  # followed as it arrives
    wait_caught_up(db, names, worker)
    assert worker.stop(sig) == 0, worker.stderr()
    summary = worker.lines[-1]
    assert summary["stopped"] == signal.Signals(sig).name
    assert summary["applied"] == {n: 500 for n in names}
    assert summary["projections"] == {n: {"position": 500, "lag": 0} for n in names}
    for n in names:  # one line per committed batch of at most 40 events, the position only moving forward
        positions = [0] + [line["position"] for line in worker.lines[:-1] if line["projection"] == n]
        assert all(0 < b - a <= 40 for a, b in zip(positions, positions[1:], strict=False)), (n, positions)
        assert positions[-1] == 500
    with pmem.open(db) as store:
        stats = store.stats()["projections"]
        assert [stats[n]["worker"]["state"] for n in names] == ["stopped"] * len(names)
        assert not any(stats[n]["worker"]["alive"] for n in names)
        write_ops(store, 100, rng, "c", keys=50)  # written while no worker runs
    restarted = Worker(db, "all", "--interval", "0.05")
    wait_caught_up(db, names, restarted)
    assert restarted.stop() == 0
    assert restarted.lines[-1]["applied"] == {n: 100 for n in names}
    rows_equal_a_rebuild(db, vectors=True)


def test_readers_catching_up_while_a_worker_runs_apply_every_event_exactly_once(
        backend: str, tmp_path: Path) -> None:
    """Each event is applied by exactly one process: what the reader's catch-ups applied plus what
    the worker applied is the log's length, per projection, and the rows equal a rebuild."""
    db = new_store_url(backend, tmp_path)
    rng = random.Random(11)
    with pmem.open(db) as store:
        store.accept("warm", "up")
    worker = Worker(db, "all", "--interval", "0.01", "--batch-size", "5")
    wait_caught_up(db, ("frontier", "graph"), worker)
    by_reader = {"frontier": 0, "graph": 0, "lexical": 0}  # the projections store.catch_up() catches up
    with pmem.open(db) as store:
        for i in range(300):
            store.apply([random_operation(rng, f"r-{i}-{j}") | {"key": f"k{rng.randrange(40)}"}
                         for j in range(rng.randint(1, 8))])
            time.sleep(rng.uniform(0, 0.02))  # the worker's poll (every 10 ms) and this read race for the batch
            if rng.random() < 0.5:
                for name, n in store.catch_up().items():
                    by_reader[name] += n
        last = store.last_index()
    wait_caught_up(db, PROJECTION_NAMES, worker)
    assert worker.stop() == 0
    by_worker = worker.lines[-1]["applied"]
    for name in by_reader:
        assert by_reader[name] + by_worker[name] == last, (name, by_reader[name], by_worker[name], last)
        assert by_reader[name] > 0 and by_worker[name] > 1, f"{name}: the race was not exercised"
    rows_equal_a_rebuild(db, vectors=True)


def test_a_second_worker_for_a_followed_projection_refuses_to_start_until_the_first_stops(
        backend: str, tmp_path: Path) -> None:
    """The heartbeat row is the registration, on either backend: one live worker per projection."""
    db = new_store_url(backend, tmp_path)
    with pmem.open(db) as store:
        write_ops(store, 50, random.Random(7), "a", keys=20)
    first = Worker(db, "frontier")
    wait_caught_up(db, ("frontier",), first)
    second = subprocess.run([PMEM_BIN, "--db", db, "worker", "--projection", "frontier"], capture_output=True,
                            text=True, cwd=REPO, env=child_env(), timeout=TIMEOUT_S)
    err = json.loads(second.stderr)
    assert second.returncode == 1 and err["error"] == "worker already running", second.stderr
    assert f"pid {first.proc.pid}" in err["detail"], err
    assert first.stop() == 0, first.stderr()
    again = Worker(db, "frontier")  # the stopped worker's row no longer counts as alive
    wait_caught_up(db, ("frontier",), again)
    assert again.stop() == 0, again.stderr()
