"""Association edges by embedding cosine, with the real offline ONNX embedder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pmem
from pmem.adapters.embedders.onnx_embedder import OnnxEmbedder
from pmem.adapters.graph.view import analyse, cosine_associations, proposals


def test_entities_whose_texts_mean_the_same_become_associated_and_carry_their_embedding(
        store: pmem.Store) -> None:
    store.accept("charles_dickens.country_of_citizenship", "United Kingdom")
    store.accept("william_blake.country_of_citizenship", "Britain")
    store.accept("lionel_messi.sport", "basketball")
    g = store.graph()
    before = set(g.associations)
    assert cosine_associations(g, OnnxEmbedder(), threshold=0.8) == 1
    assert g.associations - before == {("britain", "united_kingdom")}
    assert g.entities["britain"].embedding.shape == (384,)


def test_every_entity_gets_a_pagerank_and_a_community_and_next_reads_them(store: pmem.Store) -> None:
    store.accept("charles_dickens.spouse", "Catherine Dickens")
    store.accept("catherine_dickens.country_of_citizenship", "United Kingdom")
    store.contest("catherine_dickens.country_of_citizenship", "Belgium")
    g = store.graph()
    scores = analyse(g)
    assert set(scores) == set(g.entities)
    assert abs(sum(pr for pr, _ in scores.values()) - 1.0) < 1e-6
    assert [p["entity"] for p in proposals(g, 5)] == ["catherine_dickens"]  # contested, prerequisite known


def test_a_long_lived_session_syncs_only_what_a_write_changed_and_agrees_with_a_fresh_controller(
        store: pmem.Store) -> None:
    from pmem.adapters.graph.view import GraphSession, controller_for

    for i in range(8):
        store.accept(f"book_{i}.author", f"Author {i % 3}")
    session = GraphSession(store)
    first = session.next(5)
    assert session.changes > 8
    assert session.next(5) == first and session.changes == 0
    store.contest("book_1.author", "Someone Else")
    got = session.next(5, previous="book_1")
    assert 0 < session.changes < 8
    assert got == controller_for(store.graph(embed=True), "book_1").top(5)
    assert "book_1" in [v for v, _ in got]


def test_the_stores_graph_with_embed_gives_every_node_text_embedding_confidence_and_time(
        store: pmem.Store) -> None:
    store.accept("charles_dickens.country_of_citizenship", "United Kingdom", trust=70)
    store.accept("william_blake.country_of_citizenship", "Britain")
    plain = store.graph()  # structure only: no model loaded, no cosine edges
    assert ("britain", "united_kingdom") not in plain.associations
    assert all(e.embedding is None for e in plain.entities.values())
    g = store.graph(embed=True)
    assert ("britain", "united_kingdom") in g.associations  # cosine >= 0.8, no shared entity
    dickens = g.entities["charles_dickens"]
    assert (dickens.text, dickens.confidence, dickens.time, dickens.kind) == ("charles dickens", 0.7, 1, "relationship")
    assert all(e.embedding.shape == (384,) and e.text for e in g.entities.values())
    assert store.graph(embed=True, as_of=1).entities.keys() == {"charles_dickens", "united_kingdom"}


def test_a_graph_of_one_entity_still_gets_its_embedding(store: pmem.Store) -> None:
    store.accept("solo", "itself")
    g = store.graph(embed=True)
    assert [e.embedding.shape for e in g.entities.values()] == [(384,), (384,)]


def test_communities_do_not_depend_on_the_process_hash_seed(db_path: Path) -> None:
    """Louvain is seeded, but meets nodes and edges in the order given: a set of strings iterates in
    another order in each process (its hash seed), so the analysis sorts them first."""
    with pmem.open(db_path) as store:
        for i in range(12):
            store.accept(f"book_{i}.author", f"Author {i % 4}")
            store.accept(f"author_{i % 4}.country_of_citizenship", ["France", "Chile", "Japan"][i % 3])
    code = ("import json, sys, pmem; from pmem.adapters.graph.view import analyse; "
            "s = pmem.open(sys.argv[1]); print(json.dumps(sorted(analyse(s.graph()).items()))); s.close()")
    runs = {subprocess.run([sys.executable, "-c", code, str(db_path)], env={**os.environ, "PYTHONHASHSEED": seed},
                           capture_output=True, text=True, check=True).stdout for seed in ("1", "2", "3", "4", "5")}
    assert len(runs) == 1 and json.loads(runs.pop())
