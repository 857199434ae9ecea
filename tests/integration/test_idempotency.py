"""``op_id`` idempotency (SPEC §4): a resend appends nothing and returns the first receipt."""

from __future__ import annotations

import pmem


def test_the_same_op_id_sent_twice_records_one_event(store: pmem.Store) -> None:
    first = store.accept("city", "Paris", op_id="msg-1")
    again = store.accept("city", "Paris", op_id="msg-1")
    assert store.last_index() == 1
    assert again.duplicate and not first.duplicate
    assert again._replace(duplicate=False) == first


def test_a_resend_returns_the_first_receipt_even_after_the_cell_moved_on(store: pmem.Store) -> None:
    first = store.accept("city", "Paris", op_id="msg-1")
    store.accept("city", "Lyon")
    again = store.accept("city", "Berlin", op_id="msg-1")  # different payload, same op_id: still a resend
    assert again.event_index == first.event_index and again.head == first.head
    assert store.get("city").value == "Lyon" and store.last_index() == 2


def test_a_resend_inside_one_batch_is_recorded_once(store: pmem.Store) -> None:
    receipts = store.apply([
        {"op": "accept", "key": "x", "value": "1", "op_id": "a"},
        {"op": "accept", "key": "x", "value": "2", "op_id": "a"},
        {"op": "accept", "key": "x", "value": "3", "op_id": "b"},
    ])
    assert [r.event_index for r in receipts] == [1, 1, 2]
    assert [r.duplicate for r in receipts] == [False, True, False]
    assert store.get("x").value == "3"


def test_op_ids_are_scoped_by_namespace(db: str) -> None:
    with pmem.open(db, namespace="alice") as alice, pmem.open(db, namespace="bob") as bob:
        alice.accept("city", "Paris", op_id="m1")
        r = bob.accept("city", "Rome", op_id="m1")
        assert not r.duplicate and bob.get("city").value == "Rome" and alice.get("city").value == "Paris"


def test_op_ids_survive_reopening_the_store(db: str) -> None:
    with pmem.open(db) as s:
        s.accept("k", "v", op_id="once")
    with pmem.open(db) as s:
        assert s.accept("k", "w", op_id="once").duplicate
        assert s.last_index() == 1


def test_a_resent_batch_gets_every_first_receipt_and_appends_nothing(store: pmem.Store) -> None:
    """The resend of a whole batch (its receipts are read in bulk, a cell at a time) answers each
    operation with exactly the receipt it first got, heads included, on cells that moved on since."""
    ops = [{"op": op, "key": f"k{i % 7}", "value": f"v{i % 5}", "op_id": f"m{i}", "trust": 30 + i % 50}
           for i, op in enumerate(["accept", "contest", "reject", "accept", "support", "resolve"] * 40)]
    first = store.apply(ops)
    store.apply([{"op": "accept", "key": f"k{i}", "value": "later", "trust": 99} for i in range(7)])
    last = store.last_index()
    again = store.apply(list(reversed(ops)))
    assert store.last_index() == last
    assert all(r.duplicate for r in again)
    assert [r._replace(duplicate=False) for r in reversed(again)] == first
    store.forget("k3")  # a forgotten cell's receipts read alike both ways too
    log = store.log_store
    assert log.receipts_at([r.event_index for r in first]) == {r.event_index: log.receipt_at(r.event_index)
                                                               for r in first}
