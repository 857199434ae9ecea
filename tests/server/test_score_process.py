"""A server's score worker builds and scores each namespace in a child process, so that the server's request
threads never wait for the GIL behind it, and stores exactly what it would in its thread (equal to
``recompute``). A child that dies fails the round it ran, raised to the ``next`` that waits, and the next
round starts another; the child ends when the process that started it is killed. Real processes and real
SQLite files, on the stores a server lends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pytest

import pmem
from pmem.adapters.graph.score_process import ScoreProcess
from pmem.adapters.graph.scorer import ScoreWorker
from pmem.adapters.servers.limits import Deadline
from pmem.adapters.servers.store_pool import ServedStore, StorePool
from tests.integration.test_graph_scores import assert_next_equals_recompute, assert_stored_equals_recompute
from tests.server.processes import running


@pytest.fixture
def pool(db_path: Path) -> Iterator[StorePool]:
    made = StorePool(lambda: ServedStore(str(db_path), embedder="hashing"), 3)
    yield made
    made.close()


def _write(store: pmem.Store, namespace: str, tag: str) -> None:
    store.apply([{"op": "accept", "key": f"s{i}.author", "value": f"Writer {i % 4} {tag}", "namespace": namespace}
                 for i in range(30)] + [{"op": "contest", "key": "s1.author", "value": tag, "namespace": namespace}])


def _worker(pool: StorePool) -> ScoreWorker:
    worker = pool.scoring.worker
    assert worker is not None and worker.process is not None
    return worker


def _scored_once(pool: StorePool, store: pmem.Store) -> tuple[ScoreProcess, int]:
    """Namespace ``a`` written and scored once: the pool's score process, and its child's pid."""
    _write(store, "a", "first")
    store.what_next(3, namespace="a", wait=None)
    process = _worker(pool).process
    assert process is not None
    return process, process.run(os.getpid)


def _until_gone(pid: int) -> None:
    """Until the killed ``pid`` is reaped, and its pool had time to see it (at once, but in another thread)."""
    end = time.monotonic() + 30
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            time.sleep(0.2)
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} is still there")


def _kill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_servers_worker_scores_in_a_child_process_and_stores_what_recompute_gives(pool: StorePool) -> None:
    with pool.lend(Deadline(60)) as store:
        for ns in ("a", "b"):
            _write(store, ns, "first")
            assert_next_equals_recompute(store, ns, k=5, previous=None)
        process = _worker(pool).process
        assert process is not None
        child = process.run(os.getpid)
        assert child != os.getpid()
        _write(store, "a", "second")  # a later round carries on from the stored scores, in the same child
        assert_next_equals_recompute(store, "a", k=5, previous="s1")
        assert process.run(os.getpid) == child
        assert_stored_equals_recompute(store, "b")


def test_a_child_killed_during_a_round_fails_it_for_the_waiter_and_the_next_round_recovers(pool: StorePool) -> None:
    with pool.lend(Deadline(60)) as store:
        process, child = _scored_once(pool, store)
        os.kill(child, signal.SIGSTOP)  # the next round's scoring cannot finish...
        _write(store, "a", "second")
        stale = store.what_next(3, namespace="a", wait=0.5)  # ... so this answers from the older scores
        assert stale and stale[0]["as_of"] < store.last_index()
        os.kill(child, signal.SIGKILL)  # and the round in progress loses its child
        with pytest.raises(BrokenProcessPool):
            store.what_next(3, namespace="a", wait=None)
        assert_next_equals_recompute(store, "a", k=5, previous=None)  # a fresh child scores the next round
        assert process.run(os.getpid) not in (child, os.getpid())


def test_a_child_that_died_between_rounds_is_replaced_without_failing_one(pool: StorePool) -> None:
    with pool.lend(Deadline(60)) as store:
        _, child = _scored_once(pool, store)
        os.kill(child, signal.SIGKILL)
        _until_gone(child)
        _write(store, "a", "second")
        assert_next_equals_recompute(store, "a", k=5, previous=None)


def test_a_call_whose_child_dies_raises_and_the_next_call_starts_another() -> None:
    process = ScoreProcess()
    try:
        first = process.run(os.getpid)
        with pytest.raises(BrokenProcessPool):
            process.run(_kill_self)
        assert process.run(os.getpid) not in (first, os.getpid())
    finally:
        process.close()
    with pytest.raises(RuntimeError, match="closed"):
        process.run(os.getpid)


def test_a_store_opened_in_process_scores_in_its_thread(db_path: Path) -> None:
    with pmem.open(str(db_path), embedder="hashing") as store:
        _write(store, "a", "first")
        assert_next_equals_recompute(store, "a", k=5, previous=None)
        worker = store._searches.scoring.worker
        assert worker is not None and worker.process is None


OWNER = """
import os, sys, time
from pmem.adapters.graph.score_process import ScoreProcess
if __name__ == "__main__":
    p = ScoreProcess()
    assert p.run(os.getpid) != os.getpid()
    print(p.run(os.getppid), p.run(os.getpid), flush=True)  # the forkserver, the child
    time.sleep(300)
"""


def test_the_child_and_its_forkserver_end_when_their_owner_is_killed(tmp_path: Path) -> None:
    script = tmp_path / "owner.py"
    script.write_text(OWNER)
    owner = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None
        forkserver, child = (int(p) for p in owner.stdout.readline().split())
    finally:
        owner.kill()
        owner.wait()
    end = time.monotonic() + 20
    while running(forkserver, child) and time.monotonic() < end:
        time.sleep(0.1)
    assert not running(forkserver, child)

