"""One contract, two stores: every test here runs on the local store and on the remote one
(``pmem.connect`` over HTTP), on SQLite and on PostgreSQL, and asserts the same results, types and errors."""

from __future__ import annotations

from typing import Any

import pytest

import pmem
from pmem.projections.reading import ReadResult
from pmem.projections.vectors import SearchResult
from tests.contract.conftest import SOURCE

EV = {"source": SOURCE, "trust": 60}  # evidence both stores record alike (the credential's source, under its cap)


def test_a_write_returns_its_receipt(store: Any) -> None:
    r = store.accept("5K PB", "27:12", op_id="m1", **EV)
    assert isinstance(r, pmem.Receipt) and isinstance(r.head, pmem.Head)
    assert (r.key, r.op, r.requested, r.applied, r.head, r.op_id, r.duplicate) == (
        "5k_pb", "accept", "accept", True, pmem.Head("27:12", "active"), "m1", False)
    assert r.namespace == store.namespace and r.event_index >= 1
    again = store.accept("5K PB", "27:12", op_id="m1", **EV)  # a resend: nothing new is recorded
    assert again.duplicate and again.event_index == r.event_index


def test_every_typed_operation_has_its_effect(store: Any) -> None:
    store.accept("room", "A", **EV)
    assert store.contest("room", "B", **EV).head == pmem.Head("A", "contested")
    assert store.get("room").alternatives == ("B",)
    assert store.resolve("room", "B", **EV).head == pmem.Head("B", "active")
    assert store.support("room", **EV).op == "support"
    store.accept("pb", "27:12", **EV)
    store.accept("pb", "25:50", **EV)
    assert store.reject("pb", **EV).head == pmem.Head("27:12", "active")  # rollback: the old value reopens
    assert store.revoke("pb", **EV).head is None
    store.accept("budget", "$30k", **EV)
    r = store.revise("budget", "$50k", old_value="$30k", **EV)
    assert (r.requested, r.head) == ("revise", pmem.Head("$50k", "active"))
    assert store.declare_prerequisite("passport", "visa", **EV).key.startswith("requires.")


def test_a_lower_trust_accept_is_held_open_as_a_contest(store: Any) -> None:
    store.accept("budget", "$30k", source=SOURCE, trust=90)
    r = store.accept("budget", "$1M", source=SOURCE, trust=10)
    assert (r.op, r.requested, r.head) == ("contest", "accept", pmem.Head("$30k", "contested"))


def test_apply_writes_a_batch_atomically_and_returns_a_receipt_each(store: Any) -> None:
    receipts = store.apply([{"op": "accept", "key": "city", "value": "Paris", **EV},
                            pmem.Operation("support", store.namespace, "city",
                                           evidence=pmem.Evidence(source=SOURCE, trust=60))])
    assert [(r.key, r.op) for r in receipts] == [("city", "accept"), ("city", "support")]
    assert receipts[1].event_index == receipts[0].event_index + 1
    with pytest.raises(pmem.InvalidBatch) as bad:
        store.apply([{"op": "accept", "key": "ok", "value": "1"}, {"op": "nope", "key": "k"}])
    assert (bad.value.line, bad.value.field) == (2, "op") and str(bad.value).startswith("line 2: unknown op")
    assert store.get("ok").status == "empty"  # nothing of the bad batch was written
    assert store.apply([]) == []


def test_get_reads_now_and_as_of_an_event_index(store: Any) -> None:
    first = store.accept("5K PB", "27:12", **EV)
    store.accept("5K PB", "25:50", **EV)
    now, then = store.get("5K PB"), store.get("5K PB", as_of=first.event_index)
    assert isinstance(now, pmem.CellView)
    assert (now.value, now.status, then.value) == ("25:50", "active", "27:12")
    assert store.get("never written") == pmem.CellView(store.namespace, "never_written", None, "empty")
    assert store.get("5K PB", as_of=0).status == "empty"


def test_disclosures_carry_the_versions_as_locally(store: Any) -> None:
    store.accept("5K PB", "27:12", **EV)
    store.accept("5K PB", "25:50", **EV)
    store.contest("5K PB", "26:00", **EV)
    view = store.get("5K PB", disclose=["history", "alternatives", "support"])
    assert view.disclose == frozenset({"history", "alternatives", "support"})
    assert [(v.value, v.status) for v in view.versions] == [
        ("27:12", "superseded"), ("25:50", "contested"), ("26:00", "alternative")]
    assert view.head is not None and view.head.sources == (SOURCE,)
    d = view.to_dict()
    assert d["history"][0]["value"] == "27:12" and d["alternative_versions"][0]["value"] == "26:00"
    with pytest.raises(pmem.InvalidOperation) as bad:
        store.get("5K PB", disclose=["everything"])
    assert bad.value.field == "disclose"


def test_history_holds_every_version_with_its_intervals(store: Any) -> None:
    a = store.accept("office", "Lisbon", **EV)
    b = store.accept("office", "Madrid", **EV)
    h = store.history("office")
    assert isinstance(h, pmem.History) and all(isinstance(v, pmem.VersionView) for v in h.versions)
    old, new = h.versions
    assert (old.value, old.status, old.intervals) == ("Lisbon", "superseded", ((a.event_index, b.event_index),))
    assert (new.value, new.supersedes, new.trust, new.sources, new.evidence) == (
        "Madrid", 0, 60, (SOURCE,), (b.event_index,))
    assert [v.status for v in store.history("office", as_of=a.event_index).versions] == ["active"]


def test_frontier_lists_cells_by_key_a_page_at_a_time(store: Any) -> None:
    for key in ("b", "a", "c", "d"):
        store.accept(key, key.upper(), **EV)
    mark = store.accept("e", "E", **EV)
    store.accept("a", "A2", **EV)
    assert [(c.key, c.value) for c in store.frontier()] == [("a", "A2"), ("b", "B"), ("c", "C"), ("d", "D"),
                                                            ("e", "E")]
    assert [c.key for c in store.frontier(after="b", limit=2)] == ["c", "d"]
    assert store.frontier(as_of=mark.event_index)[0].value == "A"
    assert store.frontier(disclose=["history"])[0].to_dict()["history"][0]["value"] == "A"


def test_get_many_reads_several_keys(store: Any) -> None:
    store.accept("Home City", "Lisbon", **EV)
    views = store.get_many(["Home City", "nothing"])
    assert {k: v.value for k, v in views.items()} == {"home_city": "Lisbon", "nothing": None}


def test_log_lists_the_namespaces_events(store: Any) -> None:
    a = store.accept("x", "1", **EV)
    store.accept("y", "2", **EV)
    store.accept("z", "3", **EV)
    events = store.log(after=a.event_index - 1)
    assert [(e["key"], e["value"]) for e in events] == [("x", "1"), ("y", "2"), ("z", "3")]
    assert [e["key"] for e in store.log(after=a.event_index - 1, limit=2)] == ["x", "y"]
    assert [e["key"] for e in store.log(after=a.event_index - 1, as_of=a.event_index + 1)] == ["x", "y"]
    assert store.last_index() >= a.event_index + 2


def test_search_and_read_return_their_types(store: Any) -> None:
    store.accept("office city", "Lisbon", **EV)
    found = store.search("office city", k=3)
    assert found and isinstance(found[0], SearchResult) and found[0].cell.key == "office_city"
    assert found[0].matched == "Lisbon" and isinstance(found[0].score, float)
    r = store.read("where is the office?", k=3)
    assert isinstance(r, ReadResult) and "Lisbon" in r.context and r.items == ("office_city",)
    assert r.chars == len(r.context) and r.tokens > 0


def test_stats_and_what_next_are_plain_dicts(store: Any) -> None:
    store.accept("alice.city", "Paris", **EV)
    stats = store.stats()
    assert stats["events"] >= 1 and "frontier" in stats["projections"]
    assert isinstance(store.what_next(3), list)


def test_bad_arguments_raise_invalid_operation_naming_the_field(store: Any) -> None:
    for call, field in ((lambda: store.accept("", "x"), "key"), (lambda: store.get("k", as_of=-1), "as_of"),
                        (lambda: store.search("q", k=0), "k"), (lambda: store.accept("k", "v", trust=101), "trust"),
                        (lambda: store.log(limit=True), "limit")):
        with pytest.raises(pmem.InvalidOperation) as bad:
            call()
        assert bad.value.field == field and not isinstance(bad.value, pmem.InvalidBatch), bad.value


def test_a_closed_store_refuses_every_call(store: Any) -> None:
    store.close()
    with pytest.raises(pmem.StoreClosed):
        store.get("k")


def test_keys_with_url_characters_are_the_same_cells(store: Any) -> None:
    """A key travels in the remote store's URL path: slashes, dots, ``?``, ``#``, ``%`` and non-ASCII
    letters name the same cell as locally."""
    for raw in ("a/b c?d#e%f", "..", "Größe", "user/Home City"):
        r = store.accept(raw, "v", **EV)
        assert (store.get(raw).key, store.get(raw).value) == (r.key, "v")
        assert store.history(raw).key == r.key
