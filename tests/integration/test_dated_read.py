"""Dated cells (docs/reading.md#dated-cells): on a real store (SQLite and PostgreSQL), ``read(dated=True)``
puts each cell after the day its current value was observed: the ``observed_at`` of the event that opened
the head, else the day that event was recorded. An update, a support, a contest and ``as_of`` each change
(or keep) that day as a reader of the history would expect; an undated read is unchanged."""

from __future__ import annotations

from datetime import datetime

import pytest

import pmem
from pmem.domain.errors import InvalidOperation


def lines(store: pmem.Store, question: str, **kw: object) -> set[str]:
    return set(store.read(question, k=10, **kw).context.splitlines())


def test_each_cell_shows_the_day_its_current_value_was_observed(store: pmem.Store) -> None:
    store.apply([{"op": "accept", "key": "melanie.events", "value": "charity race", "source": "Melanie",
                  "observed_at": "2023-05-25T13:56:00"},
                 {"op": "accept", "key": "melanie.pets", "value": "a cat"}])  # no observed_at
    recorded = datetime.fromisoformat(store.log(after=1, limit=1)[0]["recorded_at"])
    assert lines(store, "what did Melanie do?", dated=True) == {
        "[25 May 2023] melanie.events = charity race",
        f"[{recorded.day} {recorded.strftime('%B %Y')}] melanie.pets = a cat"}
    assert lines(store, "what did Melanie do?") == {"melanie.events = charity race", "melanie.pets = a cat"}


def test_an_update_dates_the_new_value_a_support_keeps_the_day_and_as_of_reads_the_old(store: pmem.Store) -> None:
    store.accept("home", "Porto", observed_at="2023-01-02T09:00:00")  # 1
    store.accept("home", "Lyon", observed_at="2023-06-07T09:00:00")  # 2
    store.support("home", "Lyon", observed_at="2023-09-01T09:00:00")  # 3: the value is not new
    assert lines(store, "where is home?", dated=True) == {"[7 June 2023] home = Lyon"}
    assert lines(store, "where is home?", dated=True, as_of=1) == {"[2 January 2023] home = Porto"}
    store.contest("home", "Paris", observed_at="2023-10-01T09:00:00")  # 4
    (line,) = lines(store, "where is home?", dated=True)
    assert line.startswith("[7 June 2023] home = Lyon (") and "[contested: Paris (" in line


def test_a_head_below_min_trust_is_not_dated_as_it_is_not_shown(store: pmem.Store) -> None:
    store.accept("home", "Porto", trust=20, observed_at="2023-01-02T09:00:00")
    store.contest("home", "Lyon", trust=60, observed_at="2023-03-04T09:00:00")
    (line,) = lines(store, "where is home?", dated=True, min_trust=50)
    assert line.startswith("home = (no claim with trust >= 50)  [contested: Lyon (") and "2023" not in line
    (line,) = lines(store, "where is home?", dated=True, min_trust=20)
    assert line.startswith("[2 January 2023] home = Porto (")


def test_dated_must_be_true_or_false(store: pmem.Store) -> None:
    with pytest.raises(InvalidOperation, match="dated must be true or false"):
        store.read("where is home?", dated="yes")  # type: ignore[arg-type]
