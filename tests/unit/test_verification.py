"""The verification pass's pure part: the blind question a fact answers, and whether an answer confirms it."""

from __future__ import annotations

import pytest

from pmem.domain.extraction.facts import Fact
from pmem.domain.extraction.grounding import Utterance
from pmem.domain.extraction.verification import disagreement, question, read_answer

SAID = Utterance("Nora", ("Iker",), "2024-03-03T10:05:00")


def fact(key: str, value: str = "v") -> Fact:
    return Fact(key, value, "asserted", "accept", 0.9, 1, "text", "llm")


@pytest.mark.parametrize(("key", "said", "asked"), [
    ("nora.job", SAID, "what is Nora's job?"),  # the speaker's own name, as the conversation spells it
    ("city_hospital.location", SAID, "what is city hospital's location?"),
    ("home_city", None, "what is the user's home city?"),  # a plain record's own key
])
def test_the_question_names_the_subject_and_attribute_but_never_the_value(key: str, said: Utterance | None,
                                                                          asked: str) -> None:
    q = question(fact(key, "Porto"), said)
    assert q == f"Question: according to this message, {asked}" and "Porto" not in q


@pytest.mark.parametrize(("value", "answer"), [
    ("nurse at the city hospital", "a nurse at the city hospital"),
    ("counseling", "counseling or working in mental health"),  # a longer span around the value
    ("running, reading, or playing my violin", "running and reading"),  # half of a list
    ("Miso and Tofu", "Miso, Tofu"),
])
def test_an_answer_that_holds_the_value_confirms_it(value: str, answer: str) -> None:
    assert disagreement(value, answer) is None


@pytest.mark.parametrize(("value", "answer", "why"), [
    ("voice", "not stated", "not confirmed: asked blind, the model found no answer in the record ('not stated')"),
    ("loved ones", "Not stated.",
     "not confirmed: asked blind, the model found no answer in the record ('Not stated.')"),
    ("camping", "husband and kids", "not confirmed: asked blind, the model answered 'husband and kids'"),
    ("family moments", "games", "not confirmed: asked blind, the model answered 'games'"),
])
def test_an_answer_without_the_value_does_not_confirm_it(value: str, answer: str, why: str) -> None:
    assert disagreement(value, answer) == why


def test_a_verification_reply_needs_a_non_empty_answer() -> None:
    assert read_answer({"answer": "  Porto "}) == ("Porto", "")
    assert read_answer({"answer": ""}) == (None, "'answer' must be a non-empty string")
    assert read_answer({"answer": ["Porto"]}) == (None, "'answer' must be a non-empty string")
