"""Association edges by embedding cosine, with the real offline ONNX embedder."""

from __future__ import annotations

import pmem
from adapters.graph_view import analyse, cosine_associations, proposals
from adapters.onnx_embedder import OnnxEmbedder


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
    from adapters.graph_view import GraphSession, controller_for

    for i in range(8):
        store.accept(f"book_{i}.author", f"Author {i % 3}")
    session = GraphSession(store)
    first = session.next(5)
    assert session.changes > 8
    assert session.next(5) == first and session.changes == 0
    store.contest("book_1.author", "Someone Else")
    got = session.next(5, previous="book_1")
    assert 0 < session.changes < 8
    assert got == controller_for(store.graph(), "book_1").top(5)
    assert "book_1" in [v for v, _ in got]
