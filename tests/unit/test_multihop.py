"""The question-following hop policy (pure, no I/O): slots from relation phrases, the beam of paths,
finishing at the asked attribute, the cosine fallback."""

from __future__ import annotations

from collections.abc import Sequence

from pmem.projections.graph import build_graph
from pmem.projections.multihop import (
    cosine_facts,
    follow_question,
    hop_budget,
    path_facts,
    question_entities,
    question_slots,
)

# A 3-hop chain with a decoy at every hop: the decoys are nearer the whole question by word overlap, so
# a policy ranking facts by cosine to the question takes them; the relation policy must not.
ROWS = [
    ("our_mutual_friend.author", "Charles Dickens", "active", 50, 1, None),
    ("our_mutual_friend.country_of_origin", "Country Of Spouse Land", "active", 50, 2, None),
    ("charles_dickens.spouse", "Ellen Ternan", "active", 50, 3, None),
    ("charles_dickens.citizenship", "Country Of Citizenship Land", "active", 50, 4, None),
    ("ellen_ternan.citizenship", "Belgium", "active", 50, 5, None),
    ("ellen_ternan.birthplace", "Country Of The Spouse", "active", 50, 6, None),
    ("tunisia_national_football_team.sport", "football", "active", 50, 7, None),
    ("football.country_of_origin", "England", "active", 50, 8, None),
    ("england.capital", "London", "active", 50, 9, None),
    ("tunisia.capital", "Tunis", "active", 50, 10, None),
]
Q = "What is the country of citizenship of the spouse of the author of Our Mutual Friend?"


def overlap(question: str, texts: Sequence[str]) -> list[float]:
    """A small real scorer: the share of a text's words that the question has."""
    q = set(question.lower().replace("?", "").split())
    return [len(q & set(t.lower().replace(":", "").split())) / 10 for t in texts]


def facts_of(rows: list[tuple[object, ...]]):  # type: ignore[no-untyped-def]
    g = build_graph(rows)
    return lambda s: g.entities[s].facts if s in g.entities else []


def is_entity(rows: list[tuple[object, ...]]):  # type: ignore[no-untyped-def]
    g = build_graph(rows)
    return lambda s: s in g.entities and bool(g.entities[s].facts)


def test_slots_are_the_relation_phrases_in_question_order_longest_phrase_first() -> None:
    slots = question_slots(Q)
    assert "citizenship" in slots[0] and "spouse" in slots[1] and "author" in slots[2]
    assert len(slots) == 3  # "country of citizenship" is one phrase, not "country" + "citizenship"
    assert question_slots("Who is the partner of Laura Bush?")[0] == {"spouse"}  # a synonym


def test_a_store_attribute_name_is_a_phrase_and_entity_words_are_not() -> None:
    assert question_slots("what is the favourite colour of ada?", relations=["favourite_colour"]) == [
        {"favourite_colour"}]
    q = "Which sport is Sport Club Recife associated with?"
    assert len(question_slots(q)) == 2
    assert question_slots(q, skip=["sport_club_recife"]) == [{"sport"}]  # the club's name asks for nothing


def test_the_question_names_its_longest_entity_and_not_the_ones_inside_it() -> None:
    q = "Which city is the capital of the country of origin of the sport of the Tunisia national football team?"
    assert question_entities(q, is_entity(ROWS)) == ["tunisia_national_football_team"]
    assert question_entities(Q, is_entity(ROWS)) == ["our_mutual_friend"]


def test_the_policy_follows_the_asked_edges_past_nearer_decoys() -> None:
    paths = follow_question(Q, ["our_mutual_friend"], facts_of(ROWS), overlap, hops=3)
    best = paths[0]
    assert best.complete
    assert best.text() == ("our mutual friend -> author -> Charles Dickens -> spouse -> Ellen Ternan -> "
                           "citizenship -> Belgium")
    assert path_facts(paths[:1])[-1].value == "Belgium"
    # the cosine readout, one fact per hop, is led away by the decoys
    cos = cosine_facts(Q, ["our_mutual_friend"], facts_of(ROWS), overlap, hops=3, per_hop=1)
    assert "Belgium" not in [f.value for f in cos]


def test_a_finished_path_stops_and_a_short_question_takes_a_short_path() -> None:
    q = "Who is the spouse of the author of Our Mutual Friend?"
    best = follow_question(q, ["our_mutual_friend"], facts_of(ROWS), overlap, hops=4)[0]
    assert best.complete and [h.fact.value for h in best.hops] == ["Charles Dickens", "Ellen Ternan"]


def test_a_stale_link_is_not_followed_the_graph_holds_only_current_values() -> None:
    stale = [("charles_dickens.spouse", "Catherine Hogarth", "active", 50, 3, None),
             ("catherine_hogarth.citizenship", "England", "active", 50, 4, None)]
    # the spouse link was updated: the graph's rows are the open ones, so only the newer value is there
    rows = [r for r in ROWS if r[0] != "charles_dickens.spouse"] + [stale[1], ROWS[2]]
    best = follow_question(Q, ["our_mutual_friend"], facts_of(rows), overlap, hops=3)[0]
    assert "Catherine Hogarth" not in best.text() and best.text().endswith("Belgium")


def test_with_no_relation_phrase_the_policy_falls_back_to_cosine() -> None:
    paths = follow_question("Tell me about Our Mutual Friend and Dickens", ["our_mutual_friend"],
                            facts_of(ROWS), overlap, hops=1, beam=1)
    assert not paths[0].complete and paths[0].hops[0].slot is None
    assert paths[0].hops[0].fact.value == "Charles Dickens"  # the best cosine: "dickens" is in the question


def test_paths_never_loop_and_the_beam_is_bounded() -> None:
    rows = [("a_x.spouse", "B Y", "active", 50, 1, None), ("b_y.spouse", "A X", "active", 50, 2, None)]
    paths = follow_question("spouse of the spouse of the spouse of a x", ["a_x"], facts_of(rows), overlap,
                            hops=3, beam=2)
    assert len(paths) <= 2 and all(len(p.hops) == 1 for p in paths)


# A four-relation question over a chain of four links, asked partly in words no phrase table holds
# ("speciality ... derived from"); Italy's continent is a decoy one hop from the start.
PIRLO = [
    ("andrea_pirlo.position_played", "midfielder", "active", 50, 1, None),
    ("andrea_pirlo.citizenship", "Italy", "active", 50, 2, None),
    ("midfielder.sport", "sumo", "active", 50, 3, None),
    ("sumo.country_of_origin", "Australia", "active", 50, 4, None),
    ("australia.continent", "Oceania", "active", 50, 5, None),
    ("australia.capital", "Canberra", "active", 50, 6, None),
    ("italy.continent", "Europe", "active", 50, 7, None),
]
PIRLO_Q = "In which continent was the sport originated in the country where Andrea Pirlo's speciality derived from?"


def test_the_number_of_hops_follows_the_relations_the_question_names() -> None:
    slots = question_slots(PIRLO_Q, skip=["andrea_pirlo"])
    assert len(slots) == 4
    assert hop_budget(slots, 3) == 5  # one more than the phrases: a relation asked in unknown words
    best = follow_question(PIRLO_Q, ["andrea_pirlo"], facts_of(PIRLO), overlap, hops=3)[0]
    assert best.text().endswith("Australia -> continent -> Oceania")


def test_the_hop_budget_is_at_least_the_callers_and_capped() -> None:
    assert hop_budget([], 2) == 2  # no relation phrase: the caller's number
    assert hop_budget([frozenset({"spouse"})], 3) == 3
    assert hop_budget([frozenset({"spouse"})] * 9, 1) == 6


def test_a_path_ending_at_an_entity_with_no_facts_stays_in_the_beam() -> None:
    # Oceania has no facts: the path that reached it must not give way to longer cosine-only paths
    rows = [*PIRLO, ("canberra.twinned_with", "Nara", "active", 50, 8, None),
            ("nara.country", "Japan", "active", 50, 9, None)]
    paths = follow_question(PIRLO_Q, ["andrea_pirlo"], facts_of(rows), overlap, hops=3, beam=2)
    assert any(p.end == "oceania" for p in paths)
