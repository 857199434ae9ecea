"""Validation at one boundary: every argument of the Python API is checked
for type and range before anything is read or written, and a bad one raises a ``PmemError`` (normally
``InvalidOperation`` naming the field) with a one-line message; the domain refuses an operation that
would make an invalid event, however it was built. See docs/decisions.md, "Input validation"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import pmem
from pmem.domain.errors import InvalidBatch, InvalidOperation, PmemError, StoreClosed
from pmem.domain.operations import MAX_INDEX, Evidence, Operation, check_operation, parse_operation

BAD_NAMESPACES = [None, 5, 2.5, True, "\ud800", b"ns", ["ns"], "", "   ", "x" * 2000]


def short(value: Any) -> str:
    """A test id: the value's repr, cut short."""
    return repr(value)[:40]


def one_line(e: BaseException) -> str:
    text = str(e)
    assert text and "\n" not in text
    return text


def events_are_sound(store: pmem.Store) -> None:
    """Every event in the log has a str namespace and key, and the store still reads."""
    for _, event in store.log_store.indexed_events():
        assert isinstance(event.namespace, str) and event.namespace.strip()
        assert isinstance(event.key, str) and event.key
        event.namespace.encode("utf-8")
    store.get("k")
    store.frontier()
    store.log()


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Any:
    with pmem.open(tmp_path / "mem.db", embedder="hashing") as s:
        yield s


# -- no bad argument to one call can disable the whole store -----------------------------------------

@pytest.mark.parametrize("bad", [None, 5, "\ud800", b"ns", ["ns"], "", "   "], ids=short)
def test_a_store_opened_on_a_bad_namespace_is_refused_and_writes_nothing(db: str, bad: Any) -> None:
    with pytest.raises(InvalidOperation) as e:
        pmem.open(db, namespace=bad).accept("k", "v")
    assert e.value.field == "namespace" and one_line(e.value)
    with pmem.open(db) as store:  # the store is not poisoned: nothing was written, every read works
        assert store.last_index() == 0
        store.accept("k", "v")
        events_are_sound(store)
        assert store.get("k").value == "v"


@pytest.mark.parametrize("bad", BAD_NAMESPACES, ids=short)
def test_store_constructor_refuses_a_bad_namespace(tmp_path: Path, bad: Any) -> None:
    with pytest.raises(InvalidOperation, match="namespace"):
        pmem.Store(tmp_path / "s.db", namespace=bad)


@pytest.mark.parametrize("bad", [b for b in BAD_NAMESPACES if b is not None], ids=short)
def test_a_bad_namespace_per_call_is_refused_before_anything_is_read_or_written(sqlite_store: pmem.Store,
                                                                                 bad: Any) -> None:
    store = sqlite_store
    store.accept("k", "v")
    calls = [
        lambda: store.accept("k", "w", namespace=bad),
        lambda: store.apply([{"op": "accept", "key": "k", "value": "w", "namespace": bad}]),
        lambda: store.get("k", namespace=bad),
        lambda: store.get_many(["k"], namespace=bad),
        lambda: store.frontier(namespace=bad),
        lambda: store.history("k", namespace=bad),
        lambda: store.log(namespace=bad),
        lambda: store.search("k", namespace=bad),
        lambda: store.read("k", namespace=bad),
        lambda: store.graph(namespace=bad),
    ]
    for call in calls:
        with pytest.raises(InvalidOperation) as e:
            call()
        assert "namespace" in one_line(e.value)
    assert store.last_index() == 1
    events_are_sound(store)


def test_the_empty_namespace_is_refused_by_the_api_as_by_the_cli(sqlite_store: pmem.Store) -> None:
    with pytest.raises(InvalidOperation, match="'namespace' is empty"):
        sqlite_store.get("k", namespace="")
    with pytest.raises(InvalidBatch, match="line 1: 'namespace' is empty"):
        sqlite_store.apply([{"op": "accept", "key": "k", "value": "v", "namespace": ""}])


# -- the read side raises a PmemError for a bad argument, never a plain Python error or a misread ----

@pytest.mark.parametrize(("call", "field"), [
    (lambda s: s.get(None), "key"),
    (lambda s: s.get(5), "key"),
    (lambda s: s.history(None), "key"),
    (lambda s: s.get(b"k"), "key"),
    (lambda s: s.get("k", as_of="3"), "as_of"),
    (lambda s: s.log(after="x"), "after"),
    (lambda s: s.log(after=None), "after"),
    (lambda s: s.log(limit="2"), "limit"),
    (lambda s: s.apply(None), "operations"),
    (lambda s: s.apply(5), "operations"),
    (lambda s: s.get("k", as_of=2**70), "as_of"),
    (lambda s: s.frontier(as_of="x"), "as_of"),
    (lambda s: s.get("k", as_of=-1), "as_of"),
    (lambda s: s.get("k", as_of=3.5), "as_of"),
    (lambda s: s.get("k", as_of=True), "as_of"),
    (lambda s: s.history("k", as_of=MAX_INDEX + 1), "as_of"),
    (lambda s: s.log(as_of=-1), "as_of"),
    (lambda s: s.search("k", as_of=2**70), "as_of"),
    (lambda s: s.search("k", k=True), "k"),
    (lambda s: s.search("k", k=2**64), "k"),
    (lambda s: s.search("k", k=1.0), "k"),
    (lambda s: s.search(b"k"), "query"),
    (lambda s: s.search("q\ud800"), "query"),
    (lambda s: s.read("q", k=0), "k"),
    (lambda s: s.read("q", budget="5"), "budget"),
    (lambda s: s.read("q", budget=2**64), "budget"),
    (lambda s: s.read(None), "question"),
    (lambda s: s.read("q", mode=["cells"]), "mode"),
    (lambda s: s.read("q", alternatives=None), "alternatives"),
    (lambda s: s.read("q", min_trust=-1), "min_trust"),
    (lambda s: s.read("q", min_trust=True), "min_trust"),
    (lambda s: s.graph(as_of="1"), "as_of"),
    (lambda s: s.graph(threshold="high"), "threshold"),
    (lambda s: s.graph(embed="yes"), "embed"),
    (lambda s: s.get("k", disclose=None), "disclose"),
    (lambda s: s.get("k", disclose=[5]), "disclose"),
    (lambda s: s.get_many(None), "keys"),
    (lambda s: s.get_many("abc"), "keys"),
    (lambda s: s.get_many([None]), "key"),
    (lambda s: s.get("x" * 2000), "key"),
    (lambda s: s.rebuild(["all"]), "projection"),
    (lambda s: s.declare_prerequisite("a\ud800", "b"), "before"),
], ids=lambda x: "" if callable(x) else x)
def test_a_bad_argument_raises_invalid_operation_naming_it(sqlite_store: pmem.Store, call: Any, field: str) -> None:
    sqlite_store.accept("k", "v")
    with pytest.raises(InvalidOperation) as e:
        call(sqlite_store)
    assert e.value.field == field, e.value
    one_line(e.value)
    assert sqlite_store.last_index() == 1


def test_event_indexes_counts_and_limits_are_integers_from_0_to_2_63_minus_1(sqlite_store: pmem.Store) -> None:
    store = sqlite_store
    store.accept("k", "v")
    store.accept("k", "w")
    assert store.get("k", as_of=MAX_INDEX).value == "w"  # beyond the last index: the present
    assert store.get("k", as_of=1).value == "v"
    assert [e["event_index"] for e in store.log(after=0, limit=MAX_INDEX, as_of=MAX_INDEX)] == [1, 2]
    assert store.log(after=MAX_INDEX) == []
    assert store.history("k", as_of=0).versions == ()
    import numpy as np

    assert store.get("k", as_of=np.int64(1)).value == "v"  # an integer type is an integer
    with pytest.raises(InvalidOperation, match=r"as_of must be a non-negative event index no larger than "
                                               r"9223372036854775807, got 9223372036854775808"):
        store.get("k", as_of=MAX_INDEX + 1)


def test_log_limit_0_returns_no_event(sqlite_store: pmem.Store) -> None:
    sqlite_store.accept("k", "v")
    assert sqlite_store.log(limit=0) == []
    assert len(sqlite_store.log(limit=1)) == 1


@pytest.mark.parametrize("bad", [None, 5, b"mem.db", ["mem.db"], "", "   ", "a\x00b.db", "\udcffmem.db"], ids=short)
def test_open_refuses_a_path_that_cannot_name_a_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      bad: Any) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidOperation) as e:
        pmem.open(bad)
    assert e.value.field == "path" and one_line(e.value)
    assert list(tmp_path.iterdir()) == []  # no file named "None" (or anything else) was created


def test_open_refuses_unknown_settings_and_a_bad_synchronous_setting(tmp_path: Path) -> None:
    with pytest.raises(InvalidOperation, match="unknown setting 'vector_idx'"):
        pmem.open(tmp_path / "a.db", vector_idx="flat")
    with pytest.raises(PmemError, match="PMEM_SYNCHRONOUS must be one of"):
        pmem.open(tmp_path / "a.db", synchronous="FULL; DROP TABLE stored_events")
    for bad in ({"synchronous": 5}, {"reader": None}, {"vector_index": 3}, {"embedder": 5}, {"progress": "bars"}):
        with pytest.raises(InvalidOperation):
            pmem.open(tmp_path / "a.db", **bad)
    assert not (tmp_path / "a.db").exists() or pmem.open(tmp_path / "a.db").last_index() == 0


def test_every_method_after_close_raises_store_closed(tmp_path: Path) -> None:
    store = pmem.open(tmp_path / "mem.db", embedder="hashing")
    store.accept("k", "v")
    store.close()
    store.close()  # a second close does nothing
    calls = [
        lambda: store.accept("k", "w"), lambda: store.apply([{"op": "accept", "key": "k", "value": "w"}]),
        lambda: store.revise("k", "w"), lambda: store.declare_prerequisite("a", "b"),
        lambda: store.get("k"), lambda: store.get_many(["k"]), lambda: store.frontier(), lambda: store.history("k"),
        lambda: store.log(), lambda: store.last_index(), lambda: store.search("k"), lambda: store.read("k"),
        lambda: store.graph(), lambda: store.embedder, lambda: store.vector_search(), lambda: store.catch_up(),
        lambda: store.rebuild(), lambda: store.rebuild_vectors(), lambda: store.stats(), lambda: store.log_store,
    ]
    for call in calls:
        with pytest.raises(StoreClosed, match="^store is closed$"):
            call()
    with pmem.open(tmp_path / "mem.db") as again:
        assert again.last_index() == 1  # nothing was written after close


# -- the domain: an invalid event cannot be appended ---------------------------------------------------

GOOD = Operation("accept", "default", "k", "v")


@pytest.mark.parametrize("op", [
    GOOD._replace(namespace=None), GOOD._replace(namespace=5), GOOD._replace(namespace="\ud800"),
    GOOD._replace(namespace=""), GOOD._replace(namespace="  "), GOOD._replace(key=None), GOOD._replace(key=b"k"),
    GOOD._replace(key=""), GOOD._replace(value=None), GOOD._replace(value=5), GOOD._replace(value="   "),
    GOOD._replace(value="x" * (64 * 1024 + 1)), GOOD._replace(op="bogus"), GOOD._replace(op=None),
    GOOD._replace(evidence=None), GOOD._replace(evidence=Evidence(trust=500)),
    GOOD._replace(evidence=Evidence(trust=True)), GOOD._replace(evidence=Evidence(source=5)),
    GOOD._replace(evidence=Evidence(text="t\ud800")), GOOD._replace(evidence=Evidence(observed_at="yesterday")),
    GOOD._replace(evidence=Evidence(node_type="thing")), GOOD._replace(correction=None),
    GOOD._replace(hard_commit="yes"), GOOD._replace(old_value=""), GOOD._replace(reason=5),
    Operation("revise", "default", "k"),
], ids=short)
def test_an_operation_built_directly_is_checked_before_anything_is_written(sqlite_store: pmem.Store,
                                                                          op: Operation) -> None:
    with pytest.raises(InvalidOperation):
        check_operation(op)
    with pytest.raises(InvalidBatch, match="^line 2: "):
        sqlite_store.apply([GOOD, op])
    with pytest.raises(InvalidBatch, match="^line 1: "):
        sqlite_store.log_store.execute([op])  # the event log itself refuses it, whoever calls it
    assert sqlite_store.last_index() == 0
    events_are_sound(sqlite_store)


def test_check_operation_accepts_what_parse_operation_makes() -> None:
    lines = [
        {"op": "accept", "key": "5K PB", "value": "25:50", "text": "ran", "source": "race", "trust": 80,
         "observed_at": "2026-05-01T10:00:00Z", "op_id": "m1", "node_type": "event"},
        {"op": "revise", "key": "k", "new_value": "été", "old_value": "v", "status": "correction",
         "hard_commit": True},
        {"op": "reject", "key": "k"}, {"op": "support", "key": "k", "text": "   "},
    ]
    for line in lines:
        check_operation(Operation(*parse_operation(line)))  # built by hand: checked against the same structs


def test_a_not_a_list_to_apply_names_the_operations(sqlite_store: pmem.Store) -> None:
    with pytest.raises(InvalidOperation, match="operations must be a list of operations, got NoneType"):
        sqlite_store.apply(None)  # type: ignore[arg-type]


# -- smaller surprises ----------------------------------------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda s: s.accept("k", "   "),
    lambda s: s.accept("k", "\t\n"),
    lambda s: s.revise("k", "  "),
    lambda s: s.revise("k", "w", old_value=" "),
    lambda s: s.apply([{"op": "contest", "key": "k", "value": " "}]),
], ids=["accept", "accept-tab", "revise", "revise-old", "apply"])
def test_whitespace_only_values_are_refused_like_empty_ones(sqlite_store: pmem.Store, call: Any) -> None:
    with pytest.raises(InvalidOperation, match="is empty \\(whitespace only\\)"):
        call(sqlite_store)
    assert sqlite_store.last_index() == 0
    sqlite_store.accept("k", " padded ")  # a value with something besides whitespace is kept verbatim
    assert sqlite_store.get("k").value == " padded "


def test_only_pmem_errors_for_hostile_write_arguments(sqlite_store: pmem.Store) -> None:
    for kwargs in ({"trust": 10**5000}, {"trust": 2**70}, {"node_type": 10**5000}, {"status": 10**5000},
                   {"source": b"s"}, {"op_id": ["x"]}, {"text": "\udcff"}, {"observed_at": 5}, {"bogus": 1}):
        with pytest.raises(PmemError) as e:
            sqlite_store.revise("k", "v", **kwargs)
        one_line(e.value)
    with pytest.raises(InvalidBatch, match="unknown op"):
        sqlite_store.apply([{"op": ["accept"], "key": "k"}])
    with pytest.raises(InvalidBatch, match="unknown field 'b'"):
        sqlite_store.apply([{"op": "accept", "key": "k", "value": "v", 1: 2, "b": 3}])
    assert sqlite_store.last_index() == 0


def test_the_namespace_of_an_open_store_can_be_changed_and_is_checked(tmp_path: Path) -> None:
    with pmem.open(tmp_path / "ns.db") as store:
        store.accept("k", "in default")
        store.namespace = "other"
        assert store.namespace == "other" and store.get("k").status == "empty"
        assert store.accept("k", "in other").namespace == "other"
        assert store.get("k", namespace="default").value == "in default"
        with pytest.raises(pmem.InvalidOperation):
            store.namespace = ""
        assert store.namespace == "other"
