"""Fuzzing the Python API's signatures: every public method of ``pmem.Store`` and
``pmem.open``, called with arbitrary argument values (None, ints, huge and negative ints, floats, bools,
bytes, lists, lone surrogates, empty and blank strings) mixed with valid ones.

Only ``PmemError`` subclasses may be raised, and the log never holds an invalid event: after each
example every event has a str namespace and key that encode as UTF-8, and the store still reads."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pmem
from pmem.domain.errors import PmemError
from pmem.domain.operations import Evidence, Operation
from tests.conftest import examples

SETTINGS = settings(max_examples=examples(200), deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

odd = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=2**62, max_value=2**80),
    st.integers(min_value=-2**80, max_value=-1), st.floats(allow_nan=True), st.binary(max_size=6),
    st.text(max_size=6), st.lists(st.text(max_size=3), max_size=2), st.dictionaries(st.text(max_size=2), st.none()),
    st.sampled_from(["", "   ", "\t", "\ud800", "q\udcff", "k", "default", "history", "x" * 1100, 0, 1, 2**63 - 1,
                     2**63, 10**5000, -1, 3.5, float("nan"), b"k", ["k"], ("k",)]),
)


def mostly(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``valid`` two times in three, else an odd value (so that some calls get through to the log). (Not
    ``one_of(valid, valid, odd)``: Hypothesis flattens a nested ``one_of`` into its branches.)"""
    return st.integers(0, 2).flatmap(lambda i: odd if i == 2 else valid)


keys = mostly(st.sampled_from(["k", "budget", "Room A"]))
texts = mostly(st.sampled_from(["v", "w", "27:12", "a question"]))
indexes = mostly(st.one_of(st.none(), st.integers(0, 5)))
evidence_fields = st.fixed_dictionaries({}, optional={
    "source": mostly(st.just("s")), "trust": mostly(st.integers(0, 100)), "text": mostly(st.just("seen")),
    "op_id": mostly(st.sampled_from(["m1", "m2"])), "observed_at": mostly(st.just("2026-05-01T10:00:00")),
    "node_type": mostly(st.just("event")), "namespace": mostly(st.sampled_from(["default", "other"])),
    "bogus": odd})


def operations() -> st.SearchStrategy[Any]:
    """A mapping (some fields valid, some not), or an Operation built directly with any field values."""
    mapping = st.fixed_dictionaries({"op": st.one_of(st.sampled_from(["accept", "contest", "reject", "revise"]), odd),
                                     "key": keys}, optional={"value": texts, "new_value": texts}).flatmap(
        lambda d: evidence_fields.map(lambda ev: {**d, **ev}))
    evidence = st.builds(Evidence, st.one_of(st.none(), texts), st.one_of(st.none(), texts),
                         st.one_of(st.just(50), odd), mostly(st.none()), mostly(st.none()),
                         st.one_of(st.none(), st.just("event"), odd))
    built = st.builds(Operation, st.one_of(st.sampled_from(["accept", "contest", "noop"]), odd),
                      st.one_of(st.just("default"), odd), keys, st.one_of(st.none(), texts),
                      st.one_of(st.just(Evidence()), evidence, odd), mostly(st.none()),
                      st.one_of(st.just(False), odd), st.one_of(st.just(False), odd), mostly(st.none()))
    return st.one_of(mapping, built, odd)


def calls(store: pmem.Store, folder: Path) -> st.SearchStrategy[Callable[[], Any]]:
    """One call of the public API with drawn arguments."""
    s = store
    write = st.sampled_from(["accept", "contest", "reject", "revoke", "resolve", "support"])
    return st.one_of(
        st.builds(lambda op, k, v, ev: lambda: getattr(s, op)(k, v, **ev), write, keys, texts, evidence_fields),
        st.builds(lambda k, v, old, status, hard, ev: lambda: s.revise(k, v, old_value=old, status=status,
                                                                       hard_commit=hard, **ev),
                  keys, texts, st.one_of(st.none(), texts), st.one_of(st.just("update"), odd),
                  st.one_of(st.booleans(), odd), evidence_fields),
        st.builds(lambda a, b: lambda: s.declare_prerequisite(a, b), keys, keys),
        st.builds(lambda ops: lambda: s.apply(ops), st.one_of(st.lists(operations(), max_size=4), odd)),
        st.builds(lambda k, a, d, n: lambda: s.get(k, as_of=a, disclose=d, namespace=n),
                  keys, indexes, mostly(st.just(())), mostly(st.none())),
        st.builds(lambda ks, n: lambda: s.get_many(ks, namespace=n), st.one_of(st.lists(keys, max_size=3), odd),
                  mostly(st.none())),
        st.builds(lambda a, d, n: lambda: s.frontier(as_of=a, disclose=d, namespace=n),
                  indexes, st.one_of(st.just(["history"]), odd), mostly(st.none())),
        st.builds(lambda k, a, n: lambda: s.history(k, as_of=a, namespace=n), keys, indexes,
                  mostly(st.none())),
        st.builds(lambda af, lim, n, a: lambda: s.log(after=af, limit=lim, namespace=n, as_of=a),
                  mostly(st.just(0)), indexes, mostly(st.none()), indexes),
        st.builds(lambda q, k, a, n: lambda: s.search(q, k, as_of=a, namespace=n),
                  texts, mostly(st.just(3)), indexes, mostly(st.none())),
        st.builds(lambda q, m, k, b, d, a, alt, mt: lambda: s.read(q, mode=m, k=k, budget=b, disclose=d, as_of=a,
                                                                    alternatives=alt, min_trust=mt),
                  texts, st.one_of(st.sampled_from(["cells", "turns"]), odd), mostly(st.just(3)),
                  indexes, mostly(st.just(())), indexes, st.one_of(st.sampled_from(["summary", "all"]), odd),
                  st.one_of(st.none(), st.integers(-5, 105), odd)),
        st.builds(lambda a, n, t: lambda: s.graph(as_of=a, namespace=n, threshold=t),
                  indexes, mostly(st.none()), st.one_of(st.none(), st.just(0.5), odd)),
        st.builds(lambda p: lambda: s.rebuild(p), st.one_of(st.sampled_from(["frontier", "graph", "all"]), odd)),
        st.builds(lambda p, n, sync, r: lambda: pmem.open(p, namespace=n, synchronous=sync, reader=r).close(),
                  st.one_of(st.sampled_from([folder / "other.db", str(folder / "other.db")]), odd),
                  st.one_of(st.just("default"), odd), st.one_of(st.none(), st.just("NORMAL"), odd),
                  st.one_of(st.just("projection"), odd)),
    )


def assert_sound(store: pmem.Store) -> None:
    """Every event in the log has a str namespace and key (valid UTF-8), and the store still reads."""
    for _, event in store.log_store.indexed_events():
        assert type(event.namespace) is str and event.namespace.strip(), event
        assert type(event.key) is str and event.key, event
        (event.namespace + event.key).encode("utf-8")
        for value in (event.value, getattr(event, "text", None), getattr(event, "source", None)):
            assert value is None or type(value) is str and (value.encode("utf-8") or True)
    store.catch_up()
    store.get("k")
    store.frontier()
    store.log()
    store.history("k")


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[pmem.Store]:
    monkeypatch.chdir(tmp_path)  # a fuzzed path names a file here
    for name in ("PMEM_LLM_BASE", "PMEM_EMBED_BASE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PMEM_EMBEDDER", "hashing")
    with pmem.open(tmp_path / "fuzz.db", embedder="hashing") as s:
        s.accept("k", "v", text="the first value")
        yield s


def test_the_api_raises_only_pmem_errors_and_never_appends_an_invalid_event(store: pmem.Store,
                                                                            tmp_path: Path) -> None:
    @SETTINGS
    @given(st.data())
    def run(data: st.DataObject) -> None:
        call = data.draw(calls(store, tmp_path))
        try:
            call()
        except PmemError as e:
            assert str(e) and "\n" not in str(e), repr(e)  # one line
        assert_sound(store)

    run()
