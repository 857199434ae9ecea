"""The servers' resend rule (``eventlog.strict_resends``), on both backends: a resent ``op_id`` is a
duplicate only when key, op, value and source match what was recorded under it; anything else is a
:class:`RetryConflict` that names nothing of the recorded operation, and nothing of its batch is written.
(Outside it, the library's rule holds: the op id alone decides; see test_idempotency.)"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import pmem
from pmem.adapters.eventstore.eventlog import strict_resends
from pmem.domain.errors import RetryConflict


@pytest.fixture
def strict(store: pmem.Store) -> Iterator[pmem.Store]:
    with strict_resends():
        yield store


def test_an_exact_resend_is_a_duplicate(strict: pmem.Store) -> None:
    op = {"op": "accept", "key": "office", "value": "Madrid", "source": "a", "op_id": "m1"}
    first, = strict.apply([op])
    again, = strict.apply([op])
    assert again.duplicate and again.event_index == first.event_index and strict.last_index() == 1


@pytest.mark.parametrize("change", [{"value": "Rome"}, {"key": "home"}, {"op": "contest"}, {"source": "b"}])
def test_a_resend_that_differs_in_key_op_value_or_source_is_refused(strict: pmem.Store,
                                                                     change: dict[str, str]) -> None:
    op = {"op": "accept", "key": "office", "value": "EVIL-SQUAT", "source": "a", "op_id": "m1"}
    strict.apply([op])
    with pytest.raises(RetryConflict) as refused:
        strict.apply([{"op": "accept", "key": "other", "value": "1"}, {**op, **change}])
    assert "EVIL" not in str(refused.value) and "office" not in str(refused.value)
    assert strict.last_index() == 1 and strict.get("other").status == "empty"  # nothing of the batch


def test_a_resend_leaving_out_a_value_the_log_decided_is_a_duplicate(strict: pmem.Store) -> None:
    strict.accept("office", "Madrid")
    op = {"op": "support", "key": "office", "source": "a", "op_id": "s1"}
    first, = strict.apply([op])
    assert strict.apply([op])[0].duplicate and strict.last_index() == first.event_index


def test_resends_spread_over_the_log_are_each_matched(strict: pmem.Store) -> None:
    ops = [{"op": "accept", "key": f"k{i}", "value": f"v{i}", "source": "a", "op_id": f"m{i}"} for i in range(5)]
    for op in ops:
        strict.apply([op])
        strict.apply([{"op": "accept", "key": "filler", "value": str(i)} for i in range(300)])
    last = strict.last_index()
    assert all(r.duplicate for r in strict.apply(ops)) and strict.last_index() == last
    with pytest.raises(RetryConflict):
        strict.apply([*ops[:4], {**ops[4], "value": "other"}])


def test_the_fact_rule_lets_the_op_be_decided_anew_and_outside_the_block_the_op_id_decides(
        store: pmem.Store) -> None:
    op = {"op": "accept", "key": "office", "value": "Madrid", "source": "a", "op_id": "f1"}
    first, = store.apply([op])
    with strict_resends("fact"):
        assert store.apply([{**op, "op": "support"}])[0].duplicate  # a re-ingested record, decided anew
        with pytest.raises(RetryConflict):
            store.apply([{**op, "op": "support", "value": "Rome"}])
    assert store.apply([{**op, "value": "Rome"}])[0].event_index == first.event_index  # the library's rule
    assert store.last_index() == 1
