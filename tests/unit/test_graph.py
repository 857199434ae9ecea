"""The entity graph built from fact rows, and the graph-guided multi-hop readout (pure, no I/O)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from pmem.domain.node_types import default_node_type
from pmem.projections.graph import build_graph, entity_slug, prerequisite_key
from pmem.projections.multihop import guided_facts, named_entities

ROWS = [
    ("our_mutual_friend.author", "Charles Dickens", "active", 50, 1, None),
    ("charles_dickens.spouse", "Catherine Dickens", "active", 50, 2, None),
    ("catherine_dickens.country_of_citizenship", "Belgium", "active", 50, 3, None),
    ("charles_dickens.place_of_birth", "Portsmouth", "contested", 50, 4, None),
    ("great_expectations.author", "Charles Dickens", "active", 80, 5, None),
]


def overlap(question: str, texts: Sequence[str]) -> list[float]:
    """A small real scorer: shared words with the question."""
    q = set(question.lower().replace("?", "").split())
    return [float(len(q & set(t.lower().replace(":", "").split()))) for t in texts]


def test_subjects_and_values_that_are_subjects_become_linked_entities() -> None:
    g = build_graph(ROWS)
    assert {"our_mutual_friend", "charles_dickens", "catherine_dickens", "belgium"} <= set(g.entities)
    assert ("our_mutual_friend", "charles_dickens") in g.prerequisites
    assert ("charles_dickens", "catherine_dickens") in g.prerequisites
    assert g.entities["charles_dickens"].mentions == 2


def test_subjects_sharing_a_value_entity_are_associated() -> None:
    g = build_graph(ROWS)
    assert ("great_expectations", "our_mutual_friend") in g.associations


def test_an_entity_with_a_contested_fact_is_not_confirmed_and_one_without_facts_is_a_gap() -> None:
    g = build_graph(ROWS)
    assert not g.entities["charles_dickens"].confirmed
    assert g.entities["catherine_dickens"].confirmed
    assert not g.entities["belgium"].confirmed and g.entities["belgium"].facts == []


def test_entities_are_typed_by_rule_and_carry_confidence_and_time() -> None:
    g = build_graph(ROWS)
    assert g.entities["charles_dickens"].kind == "relationship"
    assert default_node_type("date_of_birth") == "event" and default_node_type("nickname") == "persona"
    assert g.entities["great_expectations"].confidence == 0.8 and g.entities["charles_dickens"].time == 5


def test_a_supplied_node_type_wins_over_the_rule_for_its_fact() -> None:
    rows = [("ada.nickname", "Countess", "active", 50, 1, "event"),
            ("bob.spouse", "Carol", "active", 50, 2, "persona"),
            ("dan.nickname", "Danny", "active", 50, 3, None)]
    g = build_graph(rows)
    assert [f.node_type for f in g.facts()] == ["event", "persona", "persona"]
    assert (g.entities["ada"].kind, g.entities["bob"].kind, g.entities["dan"].kind) == ("event", "persona", "persona")


def test_an_entity_takes_the_strongest_type_among_its_facts() -> None:
    rows = [("ada.nickname", "Countess", "active", 50, 1, "persona"),
            ("ada.wedding", "1835", "active", 50, 2, "event"),
            ("bob.nickname", "Bobby", "active", 50, 3, "persona"),
            ("bob.birth_date", "1900", "active", 50, 4, None)]
    g = build_graph(rows)
    assert g.entities["ada"].kind == "event"
    assert g.entities["bob"].kind == "event"  # the rule's type for the fact that supplied none
    assert g.entities["countess"].kind == "persona"  # known only as a value: no facts of its own


def test_a_declared_prerequisite_links_the_subjects_of_its_two_keys() -> None:
    declared = (prerequisite_key("visa.status", "trip.date"), json.dumps(["visa.status", "trip.date"]),
                "active", 50, 6, None)
    g = build_graph([*ROWS, declared])
    assert ("visa", "trip") in g.prerequisites and g.requires("trip") == {"visa"}


def test_the_question_names_its_longest_matching_entities() -> None:
    g = build_graph(ROWS)
    q = "What is the country of citizenship of the spouse of the author of Our Mutual Friend?"
    assert named_entities(g, q) == ["our_mutual_friend"]
    assert entity_slug("Washington, D.C.") == "washington_d_c"


def test_the_readout_follows_value_to_subject_links_to_the_end_of_the_chain() -> None:
    g = build_graph(ROWS)
    q = "What is the country of citizenship of the spouse of the author of Our Mutual Friend?"
    facts = guided_facts(g, q, overlap, hops=3, per_hop=1)
    assert [f.value for f in facts] == ["Charles Dickens", "Catherine Dickens", "Belgium"]


def test_the_readout_adds_nothing_when_the_question_names_no_known_entity() -> None:
    assert guided_facts(build_graph(ROWS), "Who painted the ceiling?", overlap) == []
