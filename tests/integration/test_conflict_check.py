"""The pre-write conflict check against a real store: its result rides on the receipt."""

from __future__ import annotations

import pmem
from pmem.adapters.graph.conflict_check import checked_write, precheck


def test_a_conflicting_write_is_recorded_as_a_contest_with_the_check_on_its_receipt(store: pmem.Store) -> None:
    store.accept("user.diet", "vegan")
    r = checked_write(store, "user.diet", "not vegan", source="chat")
    assert r["op"] == "contest" and r["head"] == {"value": "vegan", "status": "contested"}
    assert [c["kind"] for c in r["check"]["conflicts"]] == ["semantic"] and r["check"]["contest"]


def test_a_clean_update_supersedes_and_says_no_conflict(store: pmem.Store) -> None:
    store.accept("user.city", "Paris")
    r = checked_write(store, "user.city", "Lyon")
    assert r["op"] == "accept" and r["head"]["value"] == "Lyon"
    assert r["check"]["conflicts"] == [] and r["check"]["neighbours"][0] == {
        "key": "user.city", "value": "Paris", "score": 1.0}


def test_a_declared_exclusion_with_another_cell_is_found_among_the_neighbours(store: pmem.Store) -> None:
    store.accept("user.diet", "vegan")
    result = precheck(store, "user.favourite_food", "steak",
                      exclusive=[("user.diet=vegan", "user.favourite_food=steak")])
    assert [c.kind for c in result.conflicts] == ["logical"]


def test_a_conflict_on_an_empty_cell_still_writes_an_accept(store: pmem.Store) -> None:
    r = checked_write(store, "user.weight", "48 kg", confidence=0.5)
    assert r["op"] == "accept" and r["check"]["contest"]
