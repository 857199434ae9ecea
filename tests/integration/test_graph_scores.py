"""The scores ``next`` reads are stored by the graph projection and always equal ``recompute`` from scratch.

Real SQLite files and PostgreSQL. PageRank and the candidate scores are compared within 1e-12 (the stored
ones come from the same power iteration, stopped at the same tolerance, over the same graph); communities
as partitions (Louvain is seeded and fed in sorted order, so it finds the same partition).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import pmem
from pmem.adapters.graph.scores import score_rows, stored_values
from pmem.adapters.graph.view import proposals
from pmem.adapters.readmodels.graph_projection import SCORED, SCORES
from tests.conftest import Backend

NAMESPACES = ("default", "other")
SUBJECTS = ("ada", "bob", "cleo", "dune")
VALUES = ("Ada", "Bob", "Cleo", "Paris", "Rome", "Dune")  # a value that is a subject makes a chain
TOLERANCE = 1e-12

WRITE = st.one_of(
    st.tuples(st.just("accept"), st.sampled_from(NAMESPACES), st.sampled_from(SUBJECTS),
              st.sampled_from(("author", "spouse", "city")), st.sampled_from(VALUES), st.integers(10, 90)),
    st.tuples(st.just("contest"), st.sampled_from(NAMESPACES), st.sampled_from(SUBJECTS),
              st.sampled_from(("author", "spouse", "city")), st.sampled_from(VALUES), st.integers(10, 90)),
    st.tuples(st.just("revoke"), st.sampled_from(NAMESPACES), st.sampled_from(SUBJECTS),
              st.sampled_from(("author", "spouse", "city")), st.just(""), st.just(100)),
    st.tuples(st.just("require"), st.sampled_from(NAMESPACES), st.sampled_from(SUBJECTS),
              st.sampled_from(SUBJECTS), st.just(""), st.just(50)),
    st.tuples(st.just("forget"), st.sampled_from(NAMESPACES), st.sampled_from(SUBJECTS), st.just(""),
              st.just(""), st.just(0)),
    st.tuples(st.just("next"), st.sampled_from(NAMESPACES), st.sampled_from((*SUBJECTS, "paris")), st.just(""),
              st.just(""), st.integers(1, 4)),
)
Step = tuple[str, str, str, str, str, int]


def write(store: pmem.Store, step: Step) -> None:
    op, ns, subject, relation, value, n = step
    key = f"{subject}.{relation}"
    if op in ("accept", "contest"):
        getattr(store, op)(key, value, trust=n, namespace=ns)
    elif op == "revoke" and store.get(key, namespace=ns).head is not None:
        store.revoke(key, namespace=ns)
    elif op == "require" and subject != relation:
        store.declare_prerequisite(subject, relation, namespace=ns)
    elif op == "forget":
        store.forget(subject=subject, namespace=ns)
    elif op == "next":  # scores are stored now, and later writes must bring them up to date
        assert_next_equals_recompute(store, ns, k=n, previous=subject)


def partition(communities: dict[str, int]) -> set[frozenset[str]]:
    groups: dict[int, set[str]] = {}
    for v, c in communities.items():
        groups.setdefault(c, set()).add(v)
    return {frozenset(g) for g in groups.values()}


def assert_stored_equals_recompute(store: pmem.Store, ns: str) -> None:
    stored = store.projections["graph"].stored_scores(ns)
    rows, _ = score_rows(store.graph(namespace=ns))
    assert stored.keys() == rows.keys()
    for v, (base, _, pagerank) in stored.items():
        want = rows[v]
        assert abs(pagerank - want.pagerank) <= TOLERANCE, v
        assert (base is None) == (want.base is None), v
        assert base is None or want.base is None or abs(base - want.base) <= TOLERANCE, v
    assert partition({v: c for v, (_, c, _) in stored.items()}) == partition({v: r.community for v, r in rows.items()})


def assert_next_equals_recompute(store: pmem.Store, ns: str, k: int, previous: str | None) -> None:
    got = store.what_next(k, previous=previous, namespace=ns)
    want = proposals(store.graph(namespace=ns), k, previous)
    assert [{key: p[key] for key in p if key != "as_of"} for p in got] == want
    assert all(p["as_of"] == store.last_index() for p in got)
    assert_stored_equals_recompute(store, ns)


def test_stored_scores_equal_recompute_after_random_writes(backend: Backend) -> None:
    @settings(max_examples=backend.max_examples(sqlite=40, postgres=10), deadline=None)
    @given(steps=st.lists(WRITE, min_size=1, max_size=30))
    def check(steps: list[Step]) -> None:
        with pmem.open(backend.new_url(), embedder="hashing") as store:
            for step in steps:
                write(store, step)
            for ns in NAMESPACES:
                for previous in (None, *SUBJECTS):
                    assert_next_equals_recompute(store, ns, k=20, previous=previous)

    check()


def count_rows(store: pmem.Store, table: str) -> int:
    return int(store.projection_db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def scored_at(store: pmem.Store, ns: str) -> int:
    """The position the namespace's stored scores were computed at (moved only by a re-scoring)."""
    return int(store.projection_db.execute(f"SELECT position FROM {SCORED} WHERE namespace=?", (ns,)).fetchone()[0])


def test_next_reads_the_stored_scores_and_recomputes_only_a_namespace_whose_facts_changed(store: pmem.Store) -> None:
    store.apply([{"op": "accept", "key": f"s{i}.author", "value": f"Writer {i % 3}"} for i in range(12)])
    first = store.what_next(3)
    assert [p["entity"] for p in first] and first[0]["as_of"] == store.last_index() == scored_at(store, "default")
    assert store.what_next(3) == first  # nothing changed: the stored rows are read
    store.accept("other.author", "Writer 9", namespace="elsewhere")
    assert store.what_next(3) == [{**p, "as_of": store.last_index()} for p in first]  # valid at the new index
    assert scored_at(store, "default") == first[0]["as_of"]  # ... without scoring this namespace again
    store.contest("s1.author", "Writer 7")
    changed = store.what_next(3)
    assert changed != first and scored_at(store, "default") == store.last_index()
    assert_stored_equals_recompute(store, "default")


def test_a_rebuild_stores_the_same_scores_again(store: pmem.Store) -> None:
    store.apply([{"op": "accept", "key": f"s{i}.author", "value": f"Writer {i % 4}"} for i in range(20)])
    store.contest("s3.author", "Writer 5")
    before = store.what_next(10, previous="s2")
    assert count_rows(store, SCORES) > 0 and count_rows(store, SCORED) == 1
    store.rebuild("graph")
    assert store.what_next(10, previous="s2") == before


def test_history_and_system_cells_are_ranked_from_scratch(store: pmem.Store) -> None:
    store.accept("ada.spouse", "Bob")
    store.contest("ada.spouse", "Cleo")
    store.accept("bob.city", "Paris")
    got: Any = store.what_next(5, as_of=1)
    assert got == [{**p, "as_of": 1} for p in proposals(store.graph(as_of=1), 5)]
    assert store.what_next(5, as_of=10**6) == store.what_next(5)  # past the end: now, from the stored scores
    with_system = proposals(store.graph(system=True), 5)
    assert store.what_next(5, system=True) == [{**p, "as_of": store.last_index()} for p in with_system]


def test_scores_computed_before_a_write_to_their_namespace_are_not_stored(store: pmem.Store) -> None:
    store.accept("ada.spouse", "Bob")
    store.contest("ada.spouse", "Cleo")
    graph = store.projections["graph"]
    graph.catch_up()
    position, g = graph.graph_to_score("default")  # scored outside the lock, while writes go on
    store.accept("bob.city", "Paris", namespace="other")
    graph.catch_up()
    assert graph.store_scores("default", position, *stored_values(g))  # another namespace's write: stored
    position, g = graph.graph_to_score("default")
    store.accept("bob.city", "Paris")
    graph.catch_up()
    assert not graph.store_scores("default", position, *stored_values(g))  # its own: stale, refused
    assert graph.scored("default") is None
    assert_next_equals_recompute(store, "default", k=5, previous=None)
