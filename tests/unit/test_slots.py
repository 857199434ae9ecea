"""The slot card's pure part (docs/ingest.md#slots): which slots an answer fills, and what the rules keep."""

from __future__ import annotations

import json

import pytest

from pmem.domain.extraction.facts import Fact
from pmem.domain.extraction.grounding import Utterance
from pmem.domain.extraction.slots import SLOT_FORM, SLOT_PROMPT, SLOT_SCHEMA, SLOTS, filled, parse_slots
from pmem.domain.extraction.verification import question

NORA = Utterance("Nora", ("Iker",), "2024-03-03T10:05:00")
TEXT = "I started a new job as a nurse at the city hospital last month. My cats are Miso and Tofu."


def card(**values: str) -> str:
    return json.dumps({name: values.get(name, "") for name in SLOTS})


def test_every_slot_is_required_and_a_string_so_the_keys_are_the_slot_names() -> None:
    assert SLOT_SCHEMA["required"] == list(SLOTS)
    assert {p["type"] for p in SLOT_SCHEMA["properties"].values()} == {"string"}
    assert all(f"- {name}:" in SLOT_PROMPT for name in SLOTS)


def test_an_empty_slot_proposes_nothing() -> None:
    assert filled({"job": "nurse", "family": "", "places": "None", "events": "not stated.", "plans": "  "}) == [
        ("job", "nurse")]


def test_filled_slots_become_facts_about_the_speaker_with_slot_keys() -> None:
    x = parse_slots(card(job="nurse at the city hospital", family="Miso and Tofu"), 1, TEXT, NORA)
    assert [(f.key, f.value, f.form) for f in x.facts] == [
        ("nora.job", "nurse at the city hospital", SLOT_FORM), ("nora.family", "Miso and Tofu", SLOT_FORM)]
    assert x.dropped == ()


def test_a_slot_value_the_record_does_not_say_is_dropped_with_its_reason() -> None:
    x = parse_slots(card(job="nurse", identity="female", places="in New York City"), 1, TEXT, NORA)
    assert [f.key for f in x.facts] == ["nora.job"]
    assert x.dropped == (
        "slot 'places' = 'in New York City': ungrounded: the value's words are not in the record",
        "slot 'identity' = 'female': ungrounded: the value's words are not in the record")


def test_a_card_with_nothing_grounded_writes_nothing_and_says_why() -> None:
    x = parse_slots(card(job="writer"), 1, TEXT, NORA)
    assert x.facts == () and not x.failed
    assert x.reason == ("every slot was dropped: slot 'job' = 'writer': ungrounded: the value's words are not "
                        "in the record")
    assert parse_slots(card(), 1, TEXT, NORA).reason == "the model filled no slot"


def test_an_answer_that_is_no_card_fails_with_the_reason() -> None:
    x = parse_slots('{"facts": []}', 1, TEXT, NORA)
    assert x.failed and x.reason == "a JSON object without 'job'"


def test_a_slot_fact_is_verified_by_the_slot_question_and_another_fact_by_its_attribute() -> None:
    slot = Fact("nora.activities", "swimming", "asserted", "accept", 0.9, 1, TEXT, SLOT_FORM)
    free = Fact("nora.activities", "swimming", "asserted", "accept", 0.9, 1, TEXT, "llm")
    assert question(slot, NORA) == "Question: according to this message, what does Nora do as a hobby or activity?"
    assert question(free, NORA) == "Question: according to this message, what is Nora's activities?"


@pytest.mark.parametrize("name", list(SLOTS))
def test_every_slot_question_names_the_person_and_not_the_slot_value(name: str) -> None:
    asked = question(Fact(f"nora.{name}", "Porto", "asserted", "accept", 0.9, 1, TEXT, SLOT_FORM), NORA)
    assert "Nora" in asked and "Porto" not in asked and asked.endswith("?")


def test_a_value_given_under_two_slots_is_kept_under_the_first() -> None:
    x = parse_slots(card(activities="nurse at the city hospital", events="a nurse at the city hospital"), 1, TEXT, NORA)
    assert [f.key for f in x.facts] == ["nora.activities"]
    assert x.dropped == ("slot 'events' = 'a nurse at the city hospital': the same value as slot 'activities'",)


@pytest.mark.parametrize(("first_key", "card_key", "repeated"), [
    ("home_city", "places", True),  # a user's own note: both keys are about the user
    ("andrew.job", "andrew.places", True),
    ("andrew.job", "audrey.places", False),  # another person's fact is not a repeat
    ("home_city", "audrey.places", False),
])
def test_the_card_does_not_write_again_a_value_the_first_pass_wrote_for_the_same_person(
        first_key: str, card_key: str, repeated: bool) -> None:
    from pmem.adapters.llm.extractor import without_repeats
    from pmem.domain.extraction.facts import Extraction

    def fact(key: str) -> Fact:
        return Fact(key, "Porto", "asserted", "accept", 1.0, 1, "My home city is now Porto.", "llm")

    first = Extraction(1, "My home city is now Porto.", facts=(fact(first_key),))
    card = Extraction(1, "My home city is now Porto.", facts=(fact(card_key),))
    got = without_repeats(card, first)
    assert (got.facts == ()) is repeated
    assert got.dropped == ((f"fact {card_key!r} = 'Porto': the first pass wrote the same value",) if repeated else ())
