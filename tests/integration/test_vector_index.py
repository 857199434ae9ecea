"""The vector index projection and search (SPEC §4, §6) on real SQLite files and real FAISS indexes."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pmem
from pmem.adapters.embedders.hashing_embedder import HashingEmbedder
from pmem.adapters.embedders.onnx_embedder import OnnxEmbedder
from pmem.adapters.search.faiss_index import FaissIndex
from pmem.domain.state import OPEN
from pmem.projections.replay import fold
from pmem.projections.vectors import open_versions, version_text
from tests.conftest import examples


def found(results: list[Any]) -> list[tuple[str, str]]:
    return [(r.cell.key, r.matched) for r in results]


def cache_file(db: Path, kind: str = "flat") -> Path:
    return db.with_name(f"{db.name}.vec-{kind}")


def assert_same_ranking(got: list[tuple[str, float]], want: list[tuple[str, float]]) -> None:
    """The same keys in the same order, each score within float32 noise of the reference's. The index embeds
    in batches and the reference one text at a time, and the ONNX embedder's last bits differ with the batch:
    scores rounded to five places can still fall on either side of a boundary (0.703605)."""
    assert [k for k, _ in got] == [k for k, _ in want]
    assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-4)


def reference_search(store: pmem.Store, query: str, k: int,
                     as_of: int | None = None) -> list[tuple[str, float]]:
    """Brute force from the reference fold: every open version embedded (by the store's own embedder),
    each cell scored by its best."""
    n = store.last_index() if as_of is None else as_of
    q = store.embedder.embed([query])[0]
    best: dict[str, float] = {}
    for t in fold(store.log_store.indexed_events(1, n)).values():
        s = t.state
        for v in s.versions:
            if v.status in OPEN and s.namespace == store.namespace:
                score = float(store.embedder.embed([version_text(s.key, v.value)])[0] @ q)
                best[s.key] = max(best.get(s.key, -2.0), score)
    return sorted(best.items(), key=lambda kv: -kv[1])[:k]


@pytest.fixture
def runner_store(store: pmem.Store) -> pmem.Store:
    store.accept("5K PB", "27:12", source="coach")  # 1
    store.accept("5K PB", "25:50", source="race results")  # 2: 27:12 superseded
    store.accept("home city", "Paris")  # 3
    store.contest("home city", "Lyon")  # 4: Lyon is an open alternative
    store.accept("budget", "$30k")  # 5
    store.accept("favourite food", "sushi")  # 6
    store.revoke("favourite food")  # 7: the cell is empty again
    return store


def test_search_returns_the_cell_whose_key_and_value_match_best(runner_store: pmem.Store) -> None:
    assert found(runner_store.search("5k pb 25:50", k=1, ranking="vector")) == [("5k_pb", "25:50")]
    assert found(runner_store.search("what is the budget", k=1, ranking="vector")) == [("budget", "$30k")]
    top = runner_store.search("home city", k=3, ranking="vector")
    assert top[0].cell.key == "home_city" and top[0].cell.status == "contested"
    assert [r.score for r in top] == sorted((r.score for r in top), reverse=True)


def test_superseded_values_are_not_found_now_but_are_as_of_an_index_where_they_were_open(
        runner_store: pmem.Store) -> None:
    (now,) = runner_store.search("5k pb 27:12", k=1, ranking="vector")
    assert (now.cell.key, now.matched, now.cell.value) == ("5k_pb", "25:50", "25:50")
    (then,) = runner_store.search("5k pb 27:12", k=1, as_of=1, ranking="vector")
    assert (then.cell.key, then.matched, then.cell.value) == ("5k_pb", "27:12", "27:12")
    assert then.score > now.score
    assert "favourite_food" not in {r.cell.key for r in runner_store.search("favourite food sushi", ranking="vector")}
    at_6 = runner_store.search("favourite food sushi", k=1, as_of=6, ranking="vector")
    assert found(at_6) == [("favourite_food", "sushi")]
    assert runner_store.search("anything", as_of=0, ranking="vector") == []


def test_contested_alternatives_are_eligible_and_the_cell_reads_current_value_first(
        runner_store: pmem.Store) -> None:
    (r,) = runner_store.search("home city lyon", k=1, ranking="vector")
    assert (r.cell.key, r.matched, r.cell.value) == ("home_city", "Lyon", "Paris")
    assert r.cell.alternatives == ("Lyon",)
    assert r.to_dict() == {**r.cell.to_dict(), "score": r.score, "matched": "Lyon"}
    runner_store.resolve("home city", "Paris")
    (r,) = runner_store.search("home city lyon", k=1, ranking="vector")
    assert r.matched == "Paris"  # Lyon is contradicted now
    assert runner_store.search("home city lyon", k=1, as_of=4, ranking="vector")[0].matched == "Lyon"


def test_a_reopened_version_is_searchable_in_each_of_its_open_intervals(store: pmem.Store) -> None:
    store.accept("budget", "$30k")  # 1
    store.accept("budget", "$50k")  # 2
    store.revoke("budget")  # 3: $30k reopens
    store.accept("budget", "$40k")  # 4
    matched = [store.search("budget $30k", k=1, as_of=n, ranking="vector")[0].matched for n in range(1, 5)]
    assert matched == ["$30k", "$50k", "$30k", "$40k"]


def test_search_is_scoped_to_the_namespace(db_path: Path) -> None:
    with pmem.open(db_path, namespace="a") as a, pmem.open(db_path, namespace="b") as b:
        a.accept("city", "Paris")
        b.accept("town", "Paris")
        assert [r.cell.key for r in a.search("paris", ranking="vector")] == ["city"]
        assert [r.cell.key for r in b.search("paris", ranking="vector")] == ["town"]
        assert [r.cell.key for r in a.search("paris", namespace="b", ranking="vector")] == ["town"]


def test_bad_search_arguments_are_refused(runner_store: pmem.Store) -> None:
    for args, kwargs in [(("",), {}), (("x",), {"k": 0}), (("x",), {"k": -3}), (("x",), {"as_of": -1})]:
        with pytest.raises(pmem.InvalidOperation):
            runner_store.search(*args, **kwargs, ranking="vector")
    with pytest.raises(pmem.InvalidOperation, match="vector index"):
        pmem.open(":memory:", vector_index="ivf")


def test_results_are_exactly_the_top_k_even_when_one_cell_holds_most_of_the_best_vectors(
        store: pmem.Store) -> None:
    check_top_k_when_one_cell_holds_most_of_the_best_vectors(store)


def check_top_k_when_one_cell_holds_most_of_the_best_vectors(store: pmem.Store) -> None:
    """150 versions of one cell outrank everything else: a search for 5 must still give 5 cells,
    exactly those of the reference ranking."""
    store.accept("colour", "blue")
    store.apply({"op": "contest", "key": "colour", "value": f"blue shade {i}"} for i in range(150))
    store.apply({"op": "accept", "key": f"item {i}", "value": f"blue thing {i}"} for i in range(20))
    got = [(r.cell.key, r.score) for r in store.search("colour blue shade", k=5, ranking="vector")]
    assert_same_ranking(got, reference_search(store, "colour blue shade", 5))
    assert got[0][0] == "colour"


# -- incremental equals rebuilt; eligibility equals the fold of a prefix -----------------------------
STEP = st.tuples(
    st.sampled_from(["k1", "k2", "k3"]),
    st.sampled_from(["accept", "accept", "contest", "contest", "reject", "revoke", "resolve", "support"]),
    st.one_of(st.none(), st.sampled_from(["a", "b", "c"])),
    st.sampled_from([30, 50, 80]),
)
QUERIES = st.sampled_from(["k1 a", "b", "k2: c", "k3", "a b c"])


def as_op(key: str, op: str, value: str | None, trust: int) -> dict[str, Any]:
    if value is None and op in ("accept", "contest", "resolve"):
        value = "a"
    d: dict[str, Any] = {"op": op, "key": key, "trust": trust}
    if value is not None:
        d["value"] = value
    return d


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(STEP, min_size=1, max_size=40), data=st.data())
def test_eligibility_equals_the_fold_and_an_incremental_index_equals_a_rebuilt_one(steps, data) -> None:
    ops = [as_op(*s) for s in steps]
    cuts = sorted(data.draw(st.lists(st.integers(0, len(ops)), max_size=3)))
    with tempfile.TemporaryDirectory() as d:
        db = Path(d) / "mem.db"
        with pmem.open(db, embedder=HashingEmbedder()) as store:  # fast; the index ignores which
            start = 0
            for cut in [*cuts, len(ops)]:  # catch up between batches: the fold resumes mid-log
                store.apply(ops[start:cut])
                start = cut
                store.search("k1", k=2, ranking="vector")
            last = store.last_index()
            projection = store.vector_search().projection
            for n in sorted(set(data.draw(st.lists(st.integers(0, last), min_size=1, max_size=4)))):
                got = {(e.cell, e.vid) for e in projection.eligible("default", n)}
                want = {(cid.hex, vid) for cid, vid in open_versions(store.log_store.indexed_events(1, n))}
                assert got == want, f"as_of={n}"
            asks = data.draw(st.lists(st.tuples(QUERIES, st.integers(1, 4), st.none() | st.integers(0, last)),
                                      min_size=1, max_size=4))
            live = [store.search(q, k, as_of=n, ranking="vector") for q, k, n in asks]
            for (q, k, n), results in zip(asks, live, strict=True):
                want_ranked = reference_search(store, q, k, n)
                assert [r.score for r in results] == pytest.approx([s for _, s in want_ranked], abs=1e-4)
        cache_file(db).unlink()
        with pmem.open(db, embedder=HashingEmbedder()) as store:
            store.rebuild_vectors()
            rebuilt = [store.search(q, k, as_of=n, ranking="vector") for q, k, n in asks]
    for a, b in zip(live, rebuilt, strict=True):
        assert [r.cell for r in a] == [r.cell for r in b]
        assert [r.matched for r in a] == [r.matched for r in b]
        assert np.allclose([r.score for r in a], [r.score for r in b], atol=1e-5, rtol=0)


# -- the cache file ------------------------------------------------------------------------------------
def test_a_deleted_index_file_is_rebuilt_on_the_next_search_with_identical_results(
        runner_store: pmem.Store, db: str) -> None:
    before = [r.to_dict() for r in runner_store.search("home city paris budget", ranking="vector")]
    path = runner_store.backend.cache_path("vec-flat")
    assert path.exists()
    path.unlink()
    assert [r.to_dict() for r in runner_store.search("home city paris budget", ranking="vector")] == before
    assert path.exists()  # the open store writes it again
    path.unlink()
    with pmem.open(db) as fresh:
        assert [r.to_dict() for r in fresh.search("home city paris budget", ranking="vector")] == before
    assert path.exists()


def test_a_truncated_or_foreign_index_file_is_replaced_not_trusted(runner_store: pmem.Store,
                                                                   db: str) -> None:
    before = [r.to_dict() for r in runner_store.search("5k pb", ranking="vector")]
    path = runner_store.backend.cache_path("vec-flat")
    path.write_bytes(path.read_bytes()[:-7])
    with pmem.open(db) as fresh:
        assert [r.to_dict() for r in fresh.search("5k pb", ranking="vector")] == before
    assert FaissIndex.load(path) is not None
    path.write_bytes(b"not an index")
    with pmem.open(db) as fresh:
        assert [r.to_dict() for r in fresh.search("5k pb", ranking="vector")] == before


def test_the_index_file_records_its_position_and_a_reopened_store_catches_up_from_it(db_path: Path) -> None:
    with pmem.open(db_path) as store:
        store.accept("a", "1")
        store.accept("b", "2")
        store.search("a", ranking="vector")
    loaded = FaissIndex.load(cache_file(db_path))
    assert loaded is not None and (loaded[1].position, loaded[1].count, loaded[1].last_text) == (2, 2, "b: 2")
    with pmem.open(db_path) as store:
        store.accept("a", "3")
        store.accept("c", "4")
        assert [(r.cell.key, r.matched) for r in store.search("a 3", k=1, ranking="vector")] == [("a", "3")]
    loaded = FaissIndex.load(cache_file(db_path))
    assert loaded is not None and (loaded[1].position, loaded[1].count) == (4, 4)
    # Vectors added on catch-up equal freshly embedded ones: catch-up and rebuild cannot diverge.
    texts = ["a: 1", "b: 2", "a: 3", "c: 4"]
    assert np.allclose(loaded[0].matrix, OnnxEmbedder().embed(texts), atol=1e-6, rtol=0)


def test_a_memory_store_searches_without_a_file() -> None:
    with pmem.open(":memory:") as store:
        store.accept("city", "Paris")
        assert found(store.search("paris", ranking="vector")) == [("city", "Paris")]


# -- index kinds -----------------------------------------------------------------------------------------
def populate(store: pmem.Store) -> None:
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
    store.apply({"op": "accept", "key": f"{w} {i}", "value": f"{words[(i * 3) % 10]} value {i}"}
                for i, w in enumerate(words * 4))


@pytest.mark.parametrize("query", ["alpha 0", "delta value", "golf hotel", "juliet 39"])
def test_flat_and_hnsw_give_the_same_top_results_on_a_small_set(tmp_path: Path, query: str) -> None:
    results = {}
    for kind in ("flat", "hnsw"):
        with pmem.open(tmp_path / f"{kind}.db", vector_index=kind) as store:
            populate(store)
            results[kind] = [(r.cell.key, r.score) for r in store.search(query, k=5, ranking="vector")]
        assert cache_file(tmp_path / f"{kind}.db", kind).exists()
    assert_same_ranking(results["hnsw"], results["flat"])
    with pmem.open(tmp_path / "flat.db") as store:
        assert_same_ranking(results["flat"], reference_search(store, query, 5))


def test_an_hnsw_index_reloads_from_its_file_with_the_same_results(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    with pmem.open(db, vector_index="hnsw") as store:
        populate(store)
        before = [r.to_dict() for r in store.search("echo value", k=4, ranking="vector")]
    with pmem.open(db, vector_index="hnsw") as store:
        assert [r.to_dict() for r in store.search("echo value", k=4, ranking="vector")] == before


def test_lsh_runs_and_scores_what_it_finds_by_exact_cosine(tmp_path: Path) -> None:
    with pmem.open(tmp_path / "l.db", vector_index="lsh") as store:
        populate(store)
        got = store.search("bravo value", k=4, ranking="vector")
        assert len(got) == 4
        exact = dict(reference_search(store, "bravo value", 40))
        assert all(abs(r.score - exact[r.cell.key]) < 1e-5 for r in got)
        assert [r.score for r in got] == sorted((r.score for r in got), reverse=True)
        store.accept("alpha 0", "changed")
        assert "changed" in {r.matched for r in store.search("alpha 0 changed", k=3, ranking="vector")}


def test_a_slightly_stale_index_file_is_kept_and_the_missing_vectors_are_embedded_on_load(
        db_path: Path) -> None:
    with pmem.open(db_path) as store:
        store.apply({"op": "accept", "key": f"key {i}", "value": f"v{i}"} for i in range(60))
        store.search("key 1", ranking="vector")
        store.accept("key 1", "fresh")  # one vector more: rewriting 61 vectors for it is not worth it
        live = [r.to_dict() for r in store.search("key 1 fresh", ranking="vector")]
    loaded = FaissIndex.load(cache_file(db_path))
    assert loaded is not None and loaded[1].count == 60 and loaded[1].position == 60
    with pmem.open(db_path) as store:
        assert [r.to_dict() for r in store.search("key 1 fresh", ranking="vector")] == live
        assert live[0]["matched"] == "fresh"


def test_stores_that_write_and_search_the_same_file_at_once_agree_with_the_fold(db_path: Path) -> None:
    import threading

    errors: list[BaseException] = []

    def worker(w: int) -> None:
        try:
            with pmem.open(db_path) as store:
                for i in range(25):
                    store.accept(f"key {i % 5}", f"w{w} v{i}")
                    store.search(f"key {i % 5}", k=3, ranking="vector")
        except BaseException as e:  # noqa: BLE001  (re-raised in the main thread below)
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    with pmem.open(db_path) as store:
        store.search("key 1", ranking="vector")
        projection = store.vector_search().projection
        got = {(e.cell, e.vid) for e in projection.eligible("default", store.last_index())}
        want = {(cid.hex, vid) for cid, vid in open_versions(store.log_store.indexed_events())}
        assert got == want and projection.count() == 75


# -- the default embedder ----------------------------------------------------------------------------
def test_the_default_embedder_is_the_onnx_model_and_a_rebuilt_index_never_runs_it_again(db_path: Path) -> None:
    with pmem.open(db_path) as store:
        store.accept("home city", "Paris")
        store.accept("budget", "$30k")
        before = [r.to_dict() for r in store.search("where do I live", ranking="vector")]
        assert store.embedder.name == OnnxEmbedder().name == "minilm-l6-v2-int8-dq" and before[0]["key"] == "home_city"
    cache_file(db_path).unlink()
    with pmem.open(db_path) as fresh:
        assert [r.to_dict() for r in fresh.search("where do I live", ranking="vector")] == before
        assert fresh.embedder.inner.runs == 0  # every text came from the cache in the store file


def test_the_index_does_not_care_which_embedder_it_gets_and_never_mixes_two(db_path: Path) -> None:
    with pmem.open(db_path, embedder=HashingEmbedder()) as store:
        store.accept("home city", "Paris")
        store.accept("budget", "$30k")
        hashed = store.search("budget", k=1, ranking="vector")
    with pmem.open(db_path) as store:  # the ONNX default: the hashing vectors in the file are discarded
        onnx = store.search("budget", k=1, ranking="vector")
        assert_same_ranking([(r.cell.key, r.score) for r in onnx], reference_search(store, "budget", 1))
    assert hashed[0].cell == onnx[0].cell and hashed[0].score != onnx[0].score
