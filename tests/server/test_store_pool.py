"""The stores a server process lends its requests, on a real SQLite file: one store each while lent,
the last returned lent first, a wait bounded by the request's deadline, one search or read at a time
beside writes and a cell's reads, and a write batch whose deadline passes before its commit rolled back
whole."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

import pmem
from pmem.adapters.servers.limits import Deadline, DeadlinePassed
from pmem.adapters.servers.store_pool import ServedStore, StorePool
from pmem.domain.operations import parse_operation
from tests.server.deadlines import PassesAfterTheFirstCheck


@pytest.fixture
def pool(tmp_path: Path) -> Iterator[StorePool]:
    db = str(tmp_path / "mem.db")
    with pmem.open(db, embedder="hashing") as store:
        store.accept("office", "Lisbon")
    made = StorePool(lambda: ServedStore(db, embedder="hashing"), 3, heavy=2)  # two searches at once
    yield made
    made.close()


def test_requests_at_once_get_stores_of_their_own_and_one_at_a_time_reuse_one(pool: StorePool) -> None:
    with pool.lend(Deadline(5)) as first, pool.lend(Deadline(5)) as second:
        assert first is not second
        assert first.get("office").value == second.get("office").value == "Lisbon"
    with pool.lend(Deadline(5)) as again:  # the inner block ended first: `first` came back last
        assert again is first  # the last returned: the warmest
    with pool.lend(Deadline(5)) as again_too:
        assert again_too is first


def test_a_request_waits_for_a_store_only_until_its_deadline(pool: StorePool) -> None:
    with pool.lend(Deadline(5)), pool.lend(Deadline(5)), pool.lend(Deadline(5), point=True):
        with pytest.raises(DeadlinePassed, match="--connections"), pool.lend(Deadline(0.2), point=True):
            pass


def test_one_search_or_read_at_a_time_by_default_with_writes_and_a_cells_reads_beside_it(tmp_path: Path) -> None:
    db = str(tmp_path / "mem.db")
    with pmem.open(db, embedder="hashing") as store:
        store.accept("office", "Lisbon")
    pool = StorePool(lambda: ServedStore(db, embedder="hashing"), 3)
    done: list[str] = []
    try:
        with pool.lend(Deadline(5)) as search:
            with pytest.raises(DeadlinePassed, match="--heavy"), pool.lend(Deadline(0.2)):
                pass  # a second search waits its turn
            with pool.lend(Deadline(5), point=True) as a, pool.lend(Deadline(5), point=True) as b:
                assert len({id(search), id(a), id(b)}) == 3 and a.get("office").value == "Lisbon"
            with pool.lend(Deadline(5), write=True) as write:  # a write is not held to the turn...
                assert write is not search
                with pytest.raises(DeadlinePassed, match="--connections"), pool.lend(Deadline(0.2), write=True):
                    pass  # ... but never takes the last store, which a cell's reads keep
                with pool.lend(Deadline(5), point=True) as point:
                    assert point not in (search, write)
            waiting = threading.Thread(target=lambda: _lend_and_note(pool, done))
            waiting.start()
            time.sleep(0.3)
            assert done == []  # still waiting while the first holds the turn
        waiting.join(10)
        assert done == ["lent"]
    finally:
        pool.close()


def test_searches_keep_to_the_store_with_a_vector_index_and_a_cells_reads_to_the_others(tmp_path: Path) -> None:
    db = str(tmp_path / "mem.db")
    with pmem.open(db, embedder="hashing") as store:
        store.accept("office", "Lisbon")
    pool = StorePool(lambda: ServedStore(db, embedder="hashing"), 3)
    try:
        with pool.lend(Deadline(5)) as searcher:
            assert searcher.search("office", 5)[0].cell.value == "Lisbon"
        assert searcher.has_vectors
        with pool.lend(Deadline(5), point=True) as a, pool.lend(Deadline(5), point=True) as other:
            assert a is searcher and other is not searcher  # the only idle store, then a new one
        with pool.lend(Deadline(5), point=True) as point:  # searcher came back last: still not it
            assert point is other and not point.has_vectors and point.get("office").value == "Lisbon"
        with pool.lend(Deadline(5)) as search:  # `other` came back last: the searcher still
            assert search is searcher
    finally:
        pool.close()


def test_a_read_waiting_for_other_work_lends_its_turn_and_takes_it_back(tmp_path: Path) -> None:
    pool = StorePool(lambda: ServedStore(str(tmp_path / "mem.db"), embedder="hashing"), 3)
    try:
        with pool.lend(Deadline(5)) as waiting:
            with waiting.waiting():  # as `next` waits for its scores
                with pool.lend(Deadline(0.5)) as other:  # another search runs meanwhile
                    assert other is not waiting
            with pytest.raises(DeadlinePassed, match="--heavy"), pool.lend(Deadline(0.2)):
                pass  # the turn is back with the waiting read
        with ExitStack() as other_search, pytest.raises(DeadlinePassed, match="--heavy"):
            with pool.lend(Deadline(0.3)) as waiting, waiting.waiting():
                other_search.enter_context(pool.lend(Deadline(5)))  # holds the turn past the deadline
        with pool.lend(Deadline(0.5)):
            pass  # every turn was given back
    finally:
        pool.close()


def _lend_and_note(pool: StorePool, done: list[str]) -> None:
    with pool.lend(Deadline(10)):
        done.append("lent")


def test_a_batch_whose_deadline_passes_before_its_commit_writes_nothing(pool: StorePool) -> None:
    deadline = PassesAfterTheFirstCheck()
    with pool.lend(deadline) as store:
        before = store.last_index()
        ops = [parse_operation({"op": "accept", "key": f"k{i}", "value": "v"}, "default", store.key_edition)
               for i in range(20)]
        with pytest.raises(DeadlinePassed, match="nothing was written"):
            store.apply(ops)
        assert deadline.checks == 2
        store.deadline = Deadline(60)  # a read past the deadline is refused too
        assert store.last_index() == before and store.get("k0").value is None
        assert [r.applied for r in store.apply(ops)] == [True] * 20  # the same batch, resent in time
