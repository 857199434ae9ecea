"""Time travel (SPEC §4): a read as of event index N equals the fold of exactly the first N events."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import pmem
from tests.conftest import Backend
from tests.reference_model import RefStore

STEP = st.tuples(
    st.sampled_from(["k1", "k2"]),
    st.sampled_from(["accept", "accept", "accept", "contest", "reject", "revoke", "resolve", "support"]),
    st.one_of(st.none(), st.sampled_from(["a", "b", "c"])),
    st.sampled_from([30, 50, 80]),
)


def as_ops(steps: list[tuple[str, str, str | None, int]]) -> list[dict[str, object]]:
    ops = []
    for key, op, value, trust in steps:
        if value is None and op in ("accept", "contest", "resolve"):
            value = "a"
        d: dict[str, object] = {"op": op, "key": key, "trust": trust}
        if value is not None:
            d["value"] = value
        ops.append(d)
    return ops


def model_after(ops: list[dict[str, object]], n: int) -> RefStore:
    model = RefStore()
    for d in ops[:n]:
        model.apply(str(d["key"]), str(d["op"]), d.get("value"), int(d["trust"]))  # type: ignore[arg-type]
    return model


def test_a_read_as_of_n_equals_the_fold_of_the_first_n_events(backend: Backend) -> None:

    @settings(max_examples=backend.max_examples(sqlite=60, postgres=15), deadline=None)
    @given(steps=st.lists(STEP, min_size=1, max_size=40), data=st.data())
    def check(steps: list[tuple[str, str, str | None, int]], data: st.DataObject) -> None:
        ops = as_ops(steps)
        cut = data.draw(st.integers(0, len(ops)))  # two batches, so reads cross a commit boundary
        points = sorted(set(data.draw(st.lists(st.integers(0, len(ops)), min_size=1, max_size=5))))
        with pmem.open(backend.new_url()) as store:
            receipts = store.apply(ops[:cut]) + store.apply(ops[cut:])
            assert [r.event_index for r in receipts] == list(range(1, len(ops) + 1))
            for n in points:
                want = model_after(ops, n)
                got = {c.key: (c.value, c.status, list(c.alternatives)) for c in store.frontier(as_of=n)}
                assert got == want.frontier(), f"as_of={n}"
                for key in ("k1", "k2"):
                    cell = store.get(key, as_of=n)
                    expected = want.cells[key].view() if key in want.cells else (None, "empty", [])
                    assert (cell.value, cell.status, list(cell.alternatives)) == expected

    check()


def test_a_reopened_version_has_two_open_intervals_and_as_of_honours_the_gap(store: pmem.Store) -> None:
    store.accept("budget", "$30k")  # 1
    store.accept("budget", "$50k")  # 2: $30k closes
    store.revoke("budget")  # 3: $50k revoked, $30k reopens
    store.accept("budget", "$40k")  # 4: $30k closes again
    versions = {v.value: v for v in store.history("budget").versions}
    assert versions["$30k"].intervals == ((1, 2), (3, 4))
    assert versions["$30k"].status == "superseded"
    assert versions["$50k"].intervals == ((2, 3),) and versions["$50k"].status == "revoked"
    assert [store.get("budget", as_of=n).value for n in range(0, 5)] == [None, "$30k", "$50k", "$30k", "$40k"]


def test_history_as_of_shows_statuses_as_they_were(store: pmem.Store) -> None:
    store.accept("pb", "27:12")
    store.accept("pb", "25:50")
    store.reject("pb")
    then = {v.value: v.status for v in store.history("pb", as_of=2).versions}
    now = {v.value: v.status for v in store.history("pb").versions}
    assert then == {"27:12": "superseded", "25:50": "active"}
    assert now == {"27:12": "active", "25:50": "contradicted"}


def test_as_of_zero_reads_every_cell_as_empty(store: pmem.Store) -> None:
    store.accept("a", "1")
    assert store.frontier(as_of=0) == []
    assert store.get("a", as_of=0).status == "empty"
