"""The scores ``next`` reads are kept by the graph projection's score worker and agree with ``recompute``.

Real SQLite files and PostgreSQL. What equality holds (docs/graph.md): the candidate set, importance and
maximum importance exactly; PageRank (carried on from the stored vector) within 1e-8 of PageRank from
scratch, so the scores without the bonus too; the communities are a local optimum of modularity (no entity
gains by moving alone, checked with networkx's modularity) and exactly the partition the definition gives
from the graph and the partition stored before; and ``next`` answers exactly what the formula ranks from
the stored values, with any previous pick.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import pmem
from pmem.adapters.graph import scores
from pmem.adapters.graph.communities import adjacency, pagerank, partition
from pmem.adapters.graph.scores import score_rows, stored_values
from pmem.adapters.graph.view import proposals
from pmem.adapters.readmodels.graph_projection import SCORED, SCORES
from pmem.projections.controller import Node, rank, recompute
from tests.conftest import Backend
from tests.unit.test_graph_communities import SLACK, best_single_move

NAMESPACES = ("default", "other")
SUBJECTS = ("ada", "bob", "cleo", "dune")
VALUES = ("Ada", "Bob", "Cleo", "Paris", "Rome", "Dune")  # a value that is a subject makes a chain
TOLERANCE = 1e-8  # PageRank stops when an iteration moves it by < 1e-10 in L1: from two starts, this close

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


def communities_of(stored: dict[str, tuple[float | None, int, float]]) -> list[set[str]]:
    groups: dict[int, set[str]] = {}
    for v, (_, c, _) in stored.items():
        groups.setdefault(c, set()).add(v)
    return list(groups.values())


def assert_stored_equals_recompute(store: pmem.Store, ns: str) -> None:
    stored = store.projections["graph"].stored_scores(ns)
    g = store.graph(namespace=ns)
    rows, _ = score_rows(g)
    assert stored.keys() == rows.keys()
    for v, (base, _, rank_) in stored.items():
        want = rows[v]
        assert abs(rank_ - want.pagerank) <= TOLERANCE, v
        assert (base is None) == (want.base is None), v
        assert base is None or want.base is None or abs(base - want.base) <= TOLERANCE, v
    assert best_single_move(g, communities_of(stored)) <= SLACK


def from_stored(store: pmem.Store, ns: str, k: int, previous: str | None) -> list[tuple[str, float]]:
    """The formula (``recompute``) over the graph's importance and candidacy and the stored PageRank and
    communities: what ``next`` must answer."""
    g = store.graph(namespace=ns)
    stored = store.projections["graph"].stored_scores(ns)
    nodes = {v: Node(float(g.entities[v].importance), pr, c, g.entities[v].confirmed)
             for v, (_, c, pr) in stored.items()}
    requires = {b: {a for a, b2 in g.prerequisites if b2 == b and a != b} for _, b in g.prerequisites}
    return [(v, round(x, 6)) for v, x in rank(recompute(nodes, requires, previous), k)]


def assert_next_equals_recompute(store: pmem.Store, ns: str, k: int, previous: str | None) -> None:
    got = store.what_next(k, previous=previous, namespace=ns, wait=None)
    assert [(p["entity"], p["score"]) for p in got] == from_stored(store, ns, k, previous)
    g = store.graph(namespace=ns)
    everyone = {p["entity"]: p for p in proposals(g, len(g.entities) + 1, previous)}
    assert len(got) == min(k, len(everyone))
    shown = ("text", "type", "gap", "requires")
    assert all({f: p[f] for f in shown} == {f: everyone[p["entity"]][f] for f in shown} for p in got)
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
    position, g, seed = graph.graph_to_score("default")  # scored outside the lock, while writes go on
    store.accept("bob.city", "Paris", namespace="other")
    graph.catch_up()
    assert graph.store_scores("default", position, *stored_values(g, seed))  # another namespace's write: stored
    position, g, seed = graph.graph_to_score("default")
    store.accept("bob.city", "Paris")
    graph.catch_up()
    assert not graph.store_scores("default", position, *stored_values(g, seed))  # its own: stale, refused
    assert graph.scored("default")[2] is False
    assert_next_equals_recompute(store, "default", k=5, previous=None)


def test_a_re_scoring_carries_on_from_the_stored_scores_and_is_reproducible_from_them(store: pmem.Store) -> None:
    store.apply([{"op": "accept", "key": f"s{i}.{r}", "value": f"Name {(i * 7 + len(r)) % 9}"}
                 for i in range(40) for r in ("author", "friend")])
    store.what_next(5, wait=None)
    graph = store.projections["graph"]
    store.apply([{"op": "contest", "key": f"s{i}.friend", "value": f"Name {i % 4}"} for i in range(0, 40, 5)])
    graph.catch_up()
    position, g, seed = graph.graph_to_score("default")
    assert len(seed) > 40  # the stored PageRank and communities it starts from
    store.what_next(5, wait=None)  # the worker re-scores
    stored = graph.stored_scores("default")
    adj = adjacency(g)
    labels = partition(adj, {v: c for v, (_, c) in seed.items()})
    rank_ = pagerank(adj, {v: pr for v, (pr, _) in seed.items()})
    assert [stored[v][1] for v in adj.nodes] == labels.tolist()  # exactly the definition from that seed
    assert np.array_equal([stored[v][2] for v in adj.nodes], rank_)
    assert_stored_equals_recompute(store, "default")


def test_next_answers_from_the_stored_scores_while_the_worker_scores_and_no_request_waits(
        store: pmem.Store, monkeypatch: Any) -> None:
    store.apply([{"op": "accept", "key": f"s{i}.author", "value": f"Writer {i % 3}"} for i in range(12)])
    first = store.what_next(3, wait=None)
    release, started = threading.Event(), threading.Event()

    def slow(*args: Any) -> Any:
        started.set()
        release.wait(30)
        return stored_values(*args)

    monkeypatch.setattr(scores, "stored_values", slow)
    store.contest("s1.author", "Writer 7")
    t0 = time.monotonic()
    stale = store.what_next(3, wait=0.2)
    assert time.monotonic() - t0 < 5 and started.wait(5)
    assert stale == first  # the stored answer, as of the position it holds for
    assert store.get("s1.author").status == "contested"  # the scoring holds no lock: other reads go on
    release.set()
    fresh = store.what_next(3, wait=None)
    assert fresh != first and fresh[0]["as_of"] == store.last_index()
    monkeypatch.undo()
    assert_next_equals_recompute(store, "default", k=5, previous="s1")
