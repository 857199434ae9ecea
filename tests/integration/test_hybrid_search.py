"""Hybrid search: the lexical projection and its fusion with the vector channel, on real
SQLite files and PostgreSQL schemas (the ``db`` fixture), with the real ONNX embedder unless a test says
why not."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

import pmem
from pmem.adapters.embedders.hashing_embedder import HashingEmbedder
from pmem.adapters.readmodels.lexical_projection import DOCS, FTS, TERMS, VERSIONS, LexicalProjection
from pmem.adapters.search.hybrid import HybridSearch
from pmem.domain.operations import Evidence, Operation
from tests.conftest import PMEM_BIN


def keys(results: list[Any]) -> list[str]:
    return [r.cell.key for r in results]


def lexical_rows(store: pmem.Store) -> dict[str, list[tuple[Any, ...]]]:
    """Every row the lexical projection holds, in a stable order."""
    p: LexicalProjection = store.projections["lexical"]
    docs = (f"SELECT version_id, cell, vid, event_index, namespace, keywords, value, evidence FROM {FTS}"
            if p.fts5 else f"SELECT version_id, cell, vid, event_index, namespace, doc::text FROM {DOCS}")
    return {"versions": sorted(p.conn.execute(f"SELECT * FROM {VERSIONS}").fetchall()),
            "terms": sorted(p.conn.execute(f"SELECT * FROM {TERMS}").fetchall()),
            "docs": sorted(tuple(r) for r in p.conn.execute(docs).fetchall())}


def hybrid(store: pmem.Store) -> HybridSearch:
    return HybridSearch(store.vector_search(), store.projections["lexical"])


# -- the projection ------------------------------------------------------------------------------------
def test_the_lexical_projection_rebuilt_from_the_log_equals_the_one_caught_up_batch_by_batch(db: str) -> None:
    ops: list[dict[str, Any]] = [
        {"op": "accept", "key": "desk.location", "value": "toilet", "text": "The desk is in the toilet."},
        {"op": "accept", "key": "toilet.location", "value": "bathroom 2"},
        {"op": "support", "key": "toilet.location", "value": "bathroom 2", "text": "Saw the toilet in bathroom 2."},
        {"op": "contest", "key": "toilet.location", "value": "hall", "text": "Someone says the toilet is in the hall."},
        {"op": "accept", "key": "desk.location", "value": "office", "text": "Moved the desk to the office."},
        {"op": "revoke", "key": "desk.location"},
        {"op": "resolve", "key": "toilet.location", "value": "hall", "text": "The toilet is definitely in the hall."},
        {"op": "support", "key": "toilet.location", "value": "hall"},  # no text: no document
        {"op": "accept", "key": "Größe", "value": "180 cm"},
    ]
    with pmem.open(db, embedder=HashingEmbedder()) as store:  # the rows do not depend on the embedder
        for i in range(0, len(ops), 2):  # a search catches the projection up between batches
            store.apply(ops[i:i + 2])
            store.search("toilet", k=3)
        caught_up = lexical_rows(store)
        assert store.stats()["projections"]["lexical"] == {"position": store.last_index(), "lag": 0}
        assert store.rebuild("lexical")["events"] == store.last_index()
        assert lexical_rows(store) == caught_up
    assert len(caught_up["versions"]) == 5  # every version ever created, numbered as the vector projection
    assert len(caught_up["docs"]) == 7  # 5 versions + 1 support with text + 1 resolve with text
    assert dict(caught_up["terms"])[""] == 7 and dict(caught_up["terms"])["toilet"] == 5


def test_version_numbers_are_the_vector_projections(db: str) -> None:
    with pmem.open(db, embedder=HashingEmbedder()) as store:
        store.apply({"op": "accept", "key": f"k{i % 3}", "value": f"v{i}"} for i in range(12))
        store.search("k1", k=1)
        vectors = store.vector_search().projection
        with vectors._tx() as c:
            want = sorted(c.execute("SELECT vector_id, cell, vid FROM pmem_vec_versions").fetchall())
        got = sorted(r[:3] for r in lexical_rows(store)["versions"])
        assert [tuple(r) for r in got] == [tuple(r) for r in want]


def test_stats_shows_the_lexical_lag_until_a_search_catches_it_up(db: str) -> None:
    with pmem.open(db, embedder=HashingEmbedder()) as store:
        store.accept("room", "A")
        store.accept("room", "B")
        assert store.stats()["projections"]["lexical"] == {"position": 0, "lag": 2}
        store.get("room")  # a read catches up the frontier only
        assert store.stats()["projections"]["lexical"] == {"position": 0, "lag": 2}
        store.search("room")
        assert store.stats()["projections"]["lexical"] == {"position": 2, "lag": 0}
        store.accept("room", "C")
        assert store.stats()["projections"]["lexical"]["lag"] == 1


def test_rebuild_and_stats_on_the_command_line_include_the_lexical_projection(tmp_path: Path) -> None:
    db = tmp_path / "mem.db"

    def run(*args: str) -> list[dict[str, Any]]:
        r = subprocess.run([PMEM_BIN, "--db", str(db), *args], capture_output=True, env=None)
        assert r.returncode == 0, r.stderr
        return [json.loads(x) for x in r.stdout.decode().splitlines() if x.strip()]

    run("accept", "toilet.location", "bathroom 2")
    run("accept", "desk.location", "toilet")
    (stats,) = run("stats")
    assert stats["projections"]["lexical"] == {"position": 0, "lag": 2}
    (rebuilt,) = run("rebuild", "--projection", "lexical")
    assert rebuilt["events"] == 2
    (stats,) = run("stats")
    assert stats["projections"]["lexical"] == {"position": 2, "lag": 0}
    assert stats["projections"]["vectors"] == {"position": 0, "lag": 2}  # only the one asked for
    found = run("search", "where is the toilet now?", "-k", "2")
    assert [r["key"] for r in found] == ["toilet.location", "desk.location"]


# -- ranking -------------------------------------------------------------------------------------------
def test_a_question_naming_a_subject_ranks_that_cell_above_one_whose_value_names_it(db: str) -> None:
    """ALFWorld-style objects whose names are also places: the desk is in the toilet."""
    with pmem.open(db) as store:  # the ONNX model
        store.accept("desk.location", "toilet")
        store.accept("toilet.location", "bathroom 2")
        store.accept("mug.location", "desk")
        store.accept("toilet_paper.location", "cabinet 1")
        top = store.search("where is the toilet now?", k=4)
        assert keys(top)[0] == "toilet.location" and top[0].matched == "bathroom 2"
        assert keys(top).index("toilet_paper.location") > 0
        assert keys(store.search("where is the desk?", k=2))[0] == "desk.location"
        assert keys(store.search("where is the toilet paper?", k=1)) == ["toilet_paper.location"]
        scores = [r.score for r in top]
        assert scores == sorted(scores, reverse=True)


def test_the_subject_boost_finds_one_entity_among_thousands_the_embedding_cannot_tell_apart(db: str) -> None:
    """Numbered entities look alike to the embedding; the words (a rare number) and the named subject find
    the asked one first, where the vector channel alone does not."""
    with pmem.open(db) as store:
        store.apply({"op": "accept", "key": f"entity {i:05d}.country of citizenship", "value": country,
                     "text": f"The country of citizenship of Entity {i:05d} is {country}."}
                    for i in range(300) for country in [("France", "Chile", "Japan", "Kenya")[i % 4]])
        question = "What is the country of citizenship of Entity 00137?"
        top = store.search(question, k=12)
        assert top[0].cell.key == "entity_00137.country_of_citizenship" and top[0].cell.value == "Chile"
        vector_only = keys(store.search(question, k=12, ranking="vector"))
        assert vector_only[0] != "entity_00137.country_of_citizenship"


def test_evidence_text_is_searchable_only_from_the_event_that_gave_it(db: str) -> None:
    with pmem.open(db, embedder=HashingEmbedder()) as store:
        store.accept("budget", "$30k")  # 1
        store.apply([{"op": "accept", "key": f"filler {i}", "value": f"thing {i}"} for i in range(5)])  # 2-6
        store.support("budget", "$30k", text="Approved by the zanzibar committee.")  # 7
        h = hybrid(store)
        with store._w.lock:
            assert [x.key for x in h.lexical_channel("zanzibar", h.vectors.eligible("default", 7), 7, "default",
                                                     10, False)] == []  # not caught up yet: nothing
            h.lexical.catch_up()
            h.vectors.catch_up()
            at = {n: [x.key for x in h.lexical_channel("zanzibar committee", h.vectors.eligible("default", n), n,
                                                       "default", 10, False)] for n in (6, 7)}
        assert at == {6: [], 7: ["budget"]}
        assert keys(store.search("zanzibar committee", k=1)) == ["budget"]


# -- what a search may see -----------------------------------------------------------------------------
def test_as_of_only_finds_values_open_then_in_either_channel(db: str) -> None:
    with pmem.open(db) as store:
        store.accept("home city", "Reykjavik")  # 1
        store.accept("home city", "Paris")  # 2: Reykjavik superseded
        store.accept("favourite food", "sushi")  # 3
        store.revoke("favourite food")  # 4
        store.contest("home city", "Lyon")  # 5
        (now,) = store.search("reykjavik", k=1)
        assert (now.cell.key, now.matched) == ("home_city", "Paris") or now.matched == "Lyon"
        (then,) = store.search("reykjavik", k=1, as_of=1)
        assert (then.cell.key, then.matched, then.cell.value) == ("home_city", "Reykjavik", "Reykjavik")
        assert "favourite_food" not in keys(store.search("favourite food sushi"))
        assert keys(store.search("favourite food sushi", k=1, as_of=3)) == ["favourite_food"]
        assert store.search("lyon", k=1)[0].matched == "Lyon"  # an open alternative is found
        assert store.search("lyon", k=1, as_of=4)[0].matched != "Lyon"
        assert store.search("anything", as_of=0) == []
        h = hybrid(store)
        with store._w.lock:
            for n in range(0, store.last_index() + 1):
                eligible = h.vectors.eligible("default", n)
                for hit in h.lexical_channel("reykjavik paris lyon sushi favourite food home city", eligible, n,
                                             "default", 10, False):
                    assert hit.vector_id in eligible.by_id and eligible.by_id[hit.vector_id].vid == hit.vid


def test_search_is_scoped_to_the_namespace(db: str) -> None:
    with pmem.open(db, namespace="a") as a, pmem.open(db, namespace="b") as b:
        a.accept("city", "Paris")
        b.accept("town", "Paris")
        b.accept("city", "Quito")
        assert keys(a.search("paris")) == ["city"]
        assert keys(a.search("quito city")) == ["city"] and a.search("quito city")[0].matched == "Paris"
        assert keys(b.search("paris", k=1)) == ["town"]
        assert keys(a.search("quito", namespace="b", k=1)) == ["city"]


def test_a_small_namespace_ranks_only_its_own_documents_and_finds_what_ranking_all_would(
        db: str) -> None:
    with pmem.open(db, embedder=HashingEmbedder()) as store:
        store.apply([{"op": "accept", "key": f"person {i} city", "value": f"city {i % 7}", "namespace": "big"}
                     for i in range(300)])
        store.apply([{"op": "accept", "key": f"person {i} city", "value": f"city {i % 7}", "namespace": "small.one"}
                     for i in range(12)])
        store.forget("person 11 city", namespace="small.one")
        lex: LexicalProjection = store.projections["lexical"]
        store.search("city", namespace="small.one")
        counts = dict(lex.conn.execute(f"SELECT term, df FROM {TERMS} WHERE term LIKE ?", ("\x1f%",)).fetchall())
        assert counts == {"\x1fbig": 300, "\x1fsmall.one": 11}  # a forget takes its documents out
        assert lex._few_of_all("small.one") and not lex._few_of_all("big")
        asked = {"city": 1.0, "person": 1.0}
        filtered = lex.matches(asked, "small.one", store.last_index(), 50)
        assert len(filtered) == 11 and {m[3] for m in filtered} == {"small.one"}
        lex.ns_filter_share = 0.0  # rank every namespace's documents
        everything = lex.matches(asked, "small.one", store.last_index(), 400)
        assert [m for m in everything if m[3] == "small.one"] == filtered
        assert keys(store.search("person 3 city", namespace="small.one", k=3))[0] == "person_3_city"


def test_system_cells_are_hidden_unless_asked_for(db: str) -> None:
    with pmem.open(db) as store:
        store.accept("home city", "Paris")
        store.apply([Operation("accept", store.namespace, "_alias.hometown", value="home_city",
                               evidence=Evidence(text="hometown is home city (cosine 0.9)"))])
        assert store.get("home city").value == "Paris"
        for ranking in ("hybrid", "vector"):
            assert keys(store.search("hometown home city", ranking=ranking)) == ["home_city"]
            found = keys(store.search("hometown home city", ranking=ranking, system=True))
            assert set(found) == {"home_city", "_alias.hometown"}
        with pytest.raises(pmem.InvalidOperation, match="system"):
            store.search("x", system="yes")  # type: ignore[arg-type]
        with pytest.raises(pmem.InvalidOperation, match="ranking"):
            store.search("x", ranking="bm25")


def test_vector_ranking_alone_scores_by_exact_cosine(db: str) -> None:
    with pmem.open(db) as store:
        store.accept("5K PB", "25:50")
        store.accept("home city", "Paris")
        q = store.embedder.embed(["5k pb 25:50"])[0]
        (r,) = store.search("5k pb 25:50", k=1, ranking="vector")
        assert r.score == pytest.approx(float(store.embedder.embed(["5k pb: 25:50"])[0] @ q), abs=1e-5)
