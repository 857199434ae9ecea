"""The LLM extractor's slot card through the real litellm and a real OpenAI-compatible HTTP server on 127.0.0.1
(tests/chat_server.py), on a conversation of LoCoMo's shape that the project wrote.

Each call is answered from a script keyed by its schema and what it asks. The first pass (free-form facts)
finds nothing in Iker's turn; with ``slots="fallback"`` the card is asked for that turn only, its grounded
slots are verified by each slot's own question, and a slot the record does not say (``identity = male``) or
the blind question does not confirm (``places = Herons``) is dropped with its reason. ``slots="only"`` asks
the card for every turn instead, ``slots="both"`` as well (a value written twice for the same person is kept
once), ``slots="off"`` never. ``both`` is the default: an extractor built without a mode runs both passes on a
turn, with the pass.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

import pmem
from pmem.adapters.llm.client import LlmSettings
from pmem.adapters.llm.extractor import LlmExtractor
from pmem.adapters.service.ingest import FAILURE_KEY, Ingestor
from pmem.adapters.sources.records import read_records
from pmem.domain.extraction.slots import SLOTS
from tests.chat_server import chat_server

CONVERSATION = {"sample_id": "inv", "conversation": {
    "speaker_a": "Nora", "speaker_b": "Iker", "session_1_date_time": "10:05 am on 3 March, 2024",
    "session_1": [
        {"speaker": "Nora", "dia_id": "D1:1", "text": "I started a new job as a nurse at the city hospital."},
        {"speaker": "Iker", "dia_id": "D1:2",
         "text": "My cats are Miso and Tofu. I watch herons at the lake every Sunday."},
    ]}}
"""Not LoCoMo text: written for this test."""

ONE_TURN = {"sample_id": "inv", "conversation": {
    "speaker_a": "Ada", "speaker_b": "Iker", "session_1_date_time": "10:05 am on 3 March, 2024",
    "session_1": [{"speaker": "Ada", "dia_id": "D1:1",
                   "text": "I work as a nurse at the city hospital and live with two cats, Miso and Tofu."}]}}
"""One turn both passes find something in (not LoCoMo text either)."""


def card(**values: str) -> str:
    return json.dumps({name: values.get(name, "") for name in SLOTS})


FACTS = {  # the first pass, by the record's words
    "I started a new job": json.dumps({"facts": [
        {"subject": "Nora", "attribute": "job", "value": "nurse at the city hospital", "evidence": "a nurse"}]}),
    "My cats are": '{"facts": []}',
    "I work as a nurse": json.dumps({"facts": [
        {"subject": "Ada", "attribute": "job", "value": "nurse at the city hospital", "evidence": "a nurse"}]}),
}
CARDS = {
    "I started a new job": card(job="nurse at the city hospital"),
    "My cats are": card(family="Miso and Tofu", activities="watch herons at the lake", places="Herons",
                        identity="male"),
    "I work as a nurse": card(job="nurse at the city hospital", family="Miso and Tofu", places="city hospital",
                              identity="female"),
}
ANSWERS = {  # the blind question -> the model's answer
    "what is Nora's job?": '{"answer": "a nurse at the city hospital"}',
    "what work, studies or career does Nora have?": '{"answer": "a nurse at the city hospital"}',
    "who is in Iker's family, pets included?": '{"answer": "Miso and Tofu"}',
    "what does Iker do as a hobby or activity?": '{"answer": "watch herons at the lake every Sunday"}',
    "where does Iker live, come from or go?": '{"answer": "not stated"}',
    "what is Ada's job?": '{"answer": "a nurse at the city hospital"}',
    "who is in Ada's family, pets included?": '{"answer": "two cats, Miso and Tofu"}',
    "where does Ada live, come from or go?": '{"answer": "not stated"}',
}


@dataclass
class Script:
    """What the model answers per schema, and the schema names of the calls made."""

    calls: list[str] = field(default_factory=list)
    base: str = ""

    def reply(self, request: dict[str, Any]) -> str:
        asked = "\n".join(m["content"] for m in request["messages"] if m["role"] == "user")
        name = request["response_format"]["json_schema"]["name"]
        self.calls.append(name)
        script = {"answer": ANSWERS, "slots": CARDS, "facts": FACTS}[name]
        hits = [a for probe, a in script.items() if probe in asked]
        assert len(hits) == 1, f"no scripted {name} answer for {asked!r}"
        return hits[0]


@pytest.fixture
def scripted() -> Iterator[Script]:
    script = Script()
    with chat_server(script.reply) as server:
        script.base = server.base
        yield script


def ingest(store: pmem.Store, script: Script, slots: str, verify: bool = True) -> list[dict[str, Any]]:
    extractor = LlmExtractor(LlmSettings("openai/qwen", script.base, attempts=2), verify=verify, slots=slots)
    return list(Ingestor(store, extractor).run(read_records(json.dumps(CONVERSATION).encode(), "locomo")))


def test_the_card_is_asked_only_for_a_turn_the_first_pass_left_without_facts(
        store: pmem.Store, scripted: Script) -> None:
    receipts = ingest(store, scripted, "fallback")
    assert {c.key: c.value for c in store.frontier()} == {
        "nora.job": "nurse at the city hospital", "iker.family": "Miso and Tofu",
        "iker.activities": "watch herons at the lake"}
    assert scripted.calls.count("slots") == 1
    assert [r["reason"] for r in receipts if r["key"] == FAILURE_KEY] == [
        "dropped slot 'identity' = 'male': ungrounded: the value's words are not in the record",
        "dropped fact 'iker.places' = 'Herons': not confirmed: asked blind, the model found no answer in the "
        "record ('not stated')"]


def test_only_the_card_is_asked_when_it_replaces_the_first_pass(store: pmem.Store, scripted: Script) -> None:
    ingest(store, scripted, "only")
    assert "facts" not in scripted.calls and scripted.calls.count("slots") == 2
    assert store.get("nora.job").value == "nurse at the city hospital"
    assert store.get("iker.family").value == "Miso and Tofu"


def test_both_passes_write_their_facts_once(store: pmem.Store, scripted: Script) -> None:
    receipts = ingest(store, scripted, "both")
    assert scripted.calls.count("slots") == 2 and scripted.calls.count("facts") == 2
    assert scripted.calls.count("answer") == 4  # a repeated value is not asked about again
    assert {c.key: c.value for c in store.frontier()} == {
        "nora.job": "nurse at the city hospital", "iker.family": "Miso and Tofu",
        "iker.activities": "watch herons at the lake"}
    assert ("dropped fact 'nora.job' = 'nurse at the city hospital': the first pass wrote the same value"
            in [r["reason"] for r in receipts])


def test_without_the_card_the_empty_turn_writes_nothing(store: pmem.Store, scripted: Script) -> None:
    ingest(store, scripted, "off")
    assert "slots" not in scripted.calls
    assert [c.key for c in store.frontier()] == ["nora.job"]


def test_without_verification_a_grounded_slot_is_written_under_its_slot(store: pmem.Store, scripted: Script) -> None:
    ingest(store, scripted, "fallback", verify=False)
    assert store.get("iker.places").value == "Herons"
    assert store.get("iker.identity").value is None


def test_the_default_extractor_runs_both_passes_on_a_turn_and_says_what_it_dropped_and_why(
        store: pmem.Store, scripted: Script) -> None:
    extractor = LlmExtractor(LlmSettings("openai/qwen", scripted.base, attempts=2))  # no mode, no verify: defaults
    receipts = list(Ingestor(store, extractor).run(read_records(json.dumps(ONE_TURN).encode(), "locomo")))
    # one turn, both passes: the free-form facts, then the card; the pass asks the first pass's fact and each
    # new card value once (the card's job repeats the first pass's value: not asked again)
    assert scripted.calls == ["facts", "answer", "slots", "answer", "answer"]
    assert {c.key: c.value for c in store.frontier()} == {
        "ada.job": "nurse at the city hospital",  # the free-form pass's
        "ada.family": "Miso and Tofu"}  # the card's
    assert [e["op"] for e in store.log() if e["key"] == "ada.job"] == ["accept"]  # kept once
    assert [(r["key"], r["op"]) for r in receipts if r["applied"]] == [("ada.job", "accept"), ("ada.family", "accept")]
    assert [r["reason"] for r in receipts if r["key"] == FAILURE_KEY] == [
        "dropped slot 'identity' = 'female': ungrounded: the value's words are not in the record",
        "dropped fact 'ada.job' = 'nurse at the city hospital': the first pass wrote the same value",
        "dropped fact 'ada.places' = 'city hospital': not confirmed: asked blind, the model found no answer in "
        "the record ('not stated')"]


def test_an_unknown_slot_mode_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="^slots must be one of off, fallback, only, both, got 'some'$"):
        LlmExtractor(LlmSettings("openai/qwen", "http://127.0.0.1:9/v1"), slots="some")


def test_the_ingest_command_passes_its_slot_mode_to_the_extractor() -> None:
    from pmem.adapters.service.ingest import make_extractor

    settings = LlmSettings("openai/qwen", "http://127.0.0.1:9/v1")
    assert make_extractor("llm", settings, "locomo", True, "both").slots == "both"  # type: ignore[attr-defined]
    assert make_extractor("llm", settings, "locomo", True, "off").slots == "off"  # type: ignore[attr-defined]
    assert make_extractor("llm", settings, "locomo").slots == "both"  # type: ignore[attr-defined]  # the default
    assert LlmExtractor(settings).slots == "both"
