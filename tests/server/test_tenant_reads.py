"""A read pays only for its own namespace: on a real ``pmem serve`` (SQLite file and PostgreSQL) one
tenant's ``get`` is answered while another tenant's batch is being folded, without folding it, and every
read sees the writes acknowledged before it, whichever of the process's stores serves it. In process, on
the stores a server lends: a read that must fold waits for another store folding the same events, and
stops between batches once its deadline passes, leaving the projection at a batch's end; a point read
that would wait is answered by a fold of its cell's events in the log instead."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

import pmem
from pmem.adapters.readmodels.tracked_projection import WRITE_LOCK, tracked_position
from pmem.adapters.servers.limits import Deadline, DeadlinePassed
from pmem.adapters.servers.store_pool import ServedStore, StorePool
from pmem.adapters.storage.projection_db import SqliteDb
from pmem.adapters.storage.write_turns import file_of, turn_for
from tests.server.deadlines import PassesAfterTheFirstCheck
from tests.server.http_servers import add_key, bearer, serving

BIG = 5_000  # events another tenant writes: more than one catch-up batch, so folding them takes a while


def _tokens(db: str) -> tuple[dict[str, str], dict[str, str]]:
    with pmem.open(db, embedder="hashing") as store:
        store.accept("secret", "b's value", namespace="b")
        store.accept("office", "Lisbon", namespace="a")
    a = add_key(db, "a", source="agent-a", max_trust=80)
    b = add_key(db, "b", source="agent-b", max_trust=80)
    return bearer(a["token"]), bearer(b["token"])


def test_a_tenants_get_is_answered_while_another_tenants_batch_is_being_folded(db: str) -> None:
    a, b = _tokens(db)
    with serving(db, "--deadline", "60") as url, pmem.open(db, embedder="hashing") as outside:
        assert httpx.get(f"{url}/v1/cells/secret", headers=b).json()["value"] == "b's value"
        outside.apply([{"op": "accept", "key": f"k{i}", "value": f"v{i}", "namespace": "a"} for i in range(BIG)])
        outside.accept("office", "Madrid", namespace="a")
        with outside.projection_db.write(WRITE_LOCK):  # no process can fold anything until this ends
            behind = outside.last_index() - tracked_position(outside.projection_db, "frontier")
            got = httpx.get(f"{url}/v1/cells/secret", headers=b, timeout=30)
            # tenant a's own read: from the log at once while the server's catch-up thread folds, or
            # after its own fold of the batch; either way after the whole batch
            mine = InThread(f"{url}/v1/cells/office", a)
            mine.done.wait(1.0)
            still = outside.last_index() - tracked_position(outside.projection_db, "frontier")
        assert behind > 1_000 and still == behind  # the batch was being folded all along, and b folded none
        assert got.status_code == 200 and got.json()["value"] == "b's value", got.text
        assert mine.done.wait(60) and mine.response is not None
        assert mine.response.json()["value"] == "Madrid"  # read-your-writes


class InThread:
    """A ``GET`` sent on a thread of its own; ``done`` once answered."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.response: httpx.Response | None = None
        self.done = threading.Event()
        threading.Thread(target=self._send, args=(url, headers), daemon=True).start()

    def _send(self, url: str, headers: dict[str, str]) -> None:
        try:
            self.response = httpx.get(url, headers=headers, timeout=120)
        finally:
            self.done.set()


def test_every_read_sees_the_writes_acknowledged_before_it_across_the_processs_stores(db: str) -> None:
    a, _ = _tokens(db)
    wrong: list[Any] = []

    def writer_and_reader(n: int, url: str) -> None:
        with httpx.Client(base_url=url, headers=a, timeout=60) as c:
            for i in range(15):
                wrote = c.post("/v1/ops", json=[{"op": "accept", "key": f"t{n}", "value": f"{n}-{i}"}])
                got = c.get(f"/v1/cells/t{n}")
                if wrote.status_code != 200 or got.json().get("value") != f"{n}-{i}":
                    wrong.append((n, i, wrote.text, got.text))

    with serving(db, "--connections", "4") as url:
        threads = [threading.Thread(target=writer_and_reader, args=(n, url)) for n in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert wrong == []


def test_the_server_folds_a_write_into_every_projection_without_a_read(db: str) -> None:
    a, _ = _tokens(db)
    with serving(db) as url, pmem.open(db, embedder="hashing") as outside:
        wrote = httpx.post(f"{url}/v1/ops", headers=a, json=[{"op": "accept", "key": f"k{i}", "value": "v"}
                                                             for i in range(100)])
        assert wrote.status_code == 200, wrote.text
        last, waited = outside.last_index(), time.monotonic() + 60
        names = ("frontier", "graph", "lexical", "vectors")
        while any(tracked_position(outside.projection_db, n) < last for n in names) and time.monotonic() < waited:
            time.sleep(0.1)
        assert {n: tracked_position(outside.projection_db, n) for n in names} == dict.fromkeys(names, last)


@pytest.fixture
def pool(db: str) -> Iterator[StorePool]:
    with pmem.open(db, embedder="hashing") as store:
        store.accept("secret", "b's value", namespace="b")
    made = StorePool(lambda: ServedStore(db, embedder="hashing"), 3, heavy=2)  # two searches at once
    yield made
    made.close()


def _batch(namespace: str, n: int, tag: str = "v") -> list[dict[str, str]]:
    return [{"op": "accept", "key": f"k{i}", "value": f"{tag}{i}", "namespace": namespace} for i in range(n)]


def test_a_read_folds_nothing_of_another_namespace_and_all_of_its_own(pool: StorePool) -> None:
    with pool.lend(Deadline(60)) as writer, pool.lend(Deadline(60)) as reader:
        assert reader.get("secret", namespace="b").value == "b's value"
        before = reader.frontier_projection.position()
        writer.apply(_batch("a", 100))
        assert reader.get("secret", namespace="b").value == "b's value"
        assert reader.frontier_projection.position() == before  # a's batch is someone else's to fold
        assert reader.get("k7", namespace="a").value == "v7"  # a's own read folds it
        assert reader.frontier_projection.position() == reader.last_index()
        assert reader.get("k7", namespace="a", as_of=before).status == "empty"


def test_a_read_that_must_fold_waits_for_another_store_folding_and_only_until_its_deadline(
        pool: StorePool) -> None:
    with pool.lend(Deadline(60)) as writer:
        writer.apply(_batch("b", 10))
    with pool.fold_locks["frontier"]:  # another store of the process is folding
        with pool.lend(Deadline(0.3)) as reader, pytest.raises(DeadlinePassed, match="another request"):
            reader.frontier(namespace="b")
    with pool.lend(Deadline(60)) as reader:
        assert {v.key: v.value for v in reader.frontier(namespace="b")}["k1"] == "v1"


@pytest.mark.parametrize("busy", ["folding", "writing"])
def test_a_point_read_that_would_wait_for_another_fold_is_answered_from_the_log(pool: StorePool, busy: str) -> None:
    with pool.lend(Deadline(60)) as writer:
        writer.apply(_batch("b", 10))
        writer.accept("k1", "v1 again", namespace="b")
        at = writer.last_index()
        writer.accept("k1", "v1 third", namespace="b")
    with pool.lend(Deadline(60)) as reader, _held_by_another_thread(pool, reader, busy):
        before = reader.frontier_projection.position()
        assert reader.get("k1", namespace="b").value == "v1 third"  # (a wait would pass the deadline: 60 s)
        assert reader.get("k1", namespace="b", as_of=at).value == "v1 again"
        assert [v.value for v in reader.history("k1", namespace="b").versions] == ["v1", "v1 again", "v1 third"]
        assert reader.frontier_projection.position() == before  # answered by a fold of the cell's events
    with pool.lend(Deadline(60)) as reader:  # nobody else folds or writes: the read folds, as before
        assert reader.get("k1", namespace="b").value == "v1 third"
        assert reader.frontier_projection.position() == reader.last_index()


@contextmanager
def _held_by_another_thread(pool: StorePool, store: ServedStore, what: str) -> Iterator[None]:
    """The frontier's fold lock (another store of the process folding) or the store file's write turn
    (another thread writing it) held by a thread of its own while the block runs."""
    if what == "writing" and not isinstance(store.projection_db, SqliteDb):
        pytest.skip("PostgreSQL orders its writers itself: a read that must fold waits for them")
    lock = pool.fold_locks["frontier"] if what == "folding" else turn_for(file_of(store.projection_db.raw))
    assert lock is not None
    held, done = threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            held.set()
            done.wait(60)

    thread = threading.Thread(target=hold)
    thread.start()
    held.wait(10)
    try:
        yield
    finally:
        done.set()
        thread.join()


def test_a_catch_up_past_the_deadline_stops_between_batches_with_whole_batches_applied(pool: StorePool) -> None:
    with pool.lend(Deadline(60)) as writer:
        assert writer.get("secret", namespace="b").value == "b's value"  # caught up: k0..k99 follow
        writer.apply(_batch("b", 100))
    with pool.lend(PassesAfterTheFirstCheck()) as reader:
        frontier = reader.frontier_projection
        frontier.batch_size = 30
        start = frontier.position()
        with pytest.raises(DeadlinePassed, match="part of the way"):
            reader.get("k99", namespace="b")
        assert frontier.position() == start + 30  # one whole batch, and nothing of the next
    with pool.lend(Deadline(60)) as again:
        assert again.get("k99", namespace="b").value == "v99"
        assert again.get("k29", namespace="b", as_of=start + 30).value == "v29"  # k0 is event start + 1
        assert again.get("k30", namespace="b", as_of=start + 30).status == "empty"


def test_a_search_past_the_deadline_stops_before_reading_its_cells(pool: StorePool) -> None:
    class PassesAfterRanking(Deadline):
        def check(self, what: str) -> None:
            if "cells were not read" in what:
                self.at = 0
            super().check(what)

    with pool.lend(PassesAfterRanking(60)) as reader, pytest.raises(DeadlinePassed, match="cells were not read"):
        reader.search("secret", namespace="b")


def test_a_pool_of_three_keeps_a_store_for_point_reads(db: str) -> None:
    pool = StorePool(lambda: ServedStore(db, embedder="hashing"), 3, heavy=2)
    try:
        with pool.lend(Deadline(60)) as one, pool.lend(Deadline(60)) as two:
            assert one is not two
            with pytest.raises(DeadlinePassed, match="--heavy"):  # a third search waits
                with pool.lend(Deadline(0.2)):
                    pass
            with pool.lend(Deadline(5), point=True) as point:  # a get does not
                assert point not in (one, two)
        with pool.lend(Deadline(60)), pool.lend(Deadline(60)), pool.lend(Deadline(5), point=True):
            pass  # once they are back, the same again: nothing leaked
    finally:
        pool.close()


def test_a_pools_stores_share_one_score_worker_and_next_answers_as_of_now(pool: StorePool) -> None:
    with pool.lend(Deadline(60)) as one, pool.lend(Deadline(60)) as two:
        one.apply([{"op": "accept", "key": "ada.author", "value": "Bob", "namespace": "b"},
                   {"op": "contest", "key": "ada.author", "value": "Cy", "namespace": "b"}])
        first = one.what_next(k=3, namespace="b", wait=None)
        two.accept("other", "x", namespace="a")  # another namespace's write: b's scores stay current
        second = two.what_next(k=3, namespace="b", wait=None)
        assert first and [p["entity"] for p in second] == [p["entity"] for p in first]
        assert second[0]["as_of"] == two.last_index()
        assert one._searches.scoring is two._searches.scoring is pool.scoring
        assert pool.scoring.worker is not None and pool.scoring.worker.rounds >= 1  # one worker scored both
