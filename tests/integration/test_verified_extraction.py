"""The LLM extractor's verification pass through the real litellm and a real OpenAI-compatible HTTP server on
127.0.0.1 (tests/chat_server.py), on a conversation of LoCoMo's shape that the project wrote.

Each model call is answered from a script keyed by what it asks: the extraction call by the record's message,
each verification call by its blind question. A grounded fact under a loose attribute (``iker.hobbies =
Herons``) passes every string rule; only the blind question drops it, with its reason on the receipt and in
the log. Without the pass (``verify=False``) the same answers write it.
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
from pmem.domain.extraction.verification import MAX_ANSWER_TOKENS
from tests.chat_server import chat_server

CONVERSATION = {"sample_id": "inv", "conversation": {
    "speaker_a": "Nora", "speaker_b": "Iker", "session_1_date_time": "10:05 am on 3 March, 2024",
    "session_1": [
        {"speaker": "Nora", "dia_id": "D1:1",
         "text": "I started a new job as a nurse at the city hospital last month."},
        {"speaker": "Iker", "dia_id": "D1:2", "text": "My cats are Miso and Tofu. Herons have always fascinated me."},
    ]}}
"""Not LoCoMo text: written for this test."""


def facts(*items: tuple[str, str, str]) -> str:
    return json.dumps({"facts": [{"subject": s, "attribute": a, "value": v, "evidence": v} for s, a, v in items]})


EXTRACTED = {
    "I started a new job": facts(("Nora", "job", "nurse at the city hospital")),
    "My cats are": facts(("Iker", "cat_names", "Miso and Tofu"), ("Iker", "hobbies", "Herons")),
}
ANSWERS = {  # the blind question -> the model's answer
    "what is Nora's job?": '{"answer": "a nurse at the city hospital"}',
    "what is Iker's cat names?": '{"answer": "Miso and Tofu"}',
    "what is Iker's hobbies?": '{"answer": "not stated"}',
}


@dataclass
class Script:
    """What the model answers (the blind question -> its answer; a test may change one), the ``/v1`` URL it
    answers at and, per call made, the schema's name and the answer's bound (``max_tokens``)."""

    answers: dict[str, str] = field(default_factory=lambda: dict(ANSWERS))
    calls: list[tuple[str, int | None]] = field(default_factory=list)
    base: str = ""

    def reply(self, request: dict[str, Any]) -> str:
        asked = "\n".join(m["content"] for m in request["messages"] if m["role"] == "user")  # a retry too
        name = request["response_format"]["json_schema"]["name"]
        self.calls.append((name, request.get("max_tokens")))
        hits = [a for probe, a in (self.answers if name == "answer" else EXTRACTED).items() if probe in asked]
        assert len(hits) == 1, f"no scripted answer for {asked!r}"
        return hits[0]


@pytest.fixture
def scripted() -> Iterator[Script]:
    """A real OpenAI-compatible server on 127.0.0.1 answering each call from the scripts above (a call they
    do not cover gets no answer, and the test fails on what was written)."""
    script = Script()
    with chat_server(script.reply) as server:
        script.base = server.base
        yield script


def ingest(store: pmem.Store, script: Script, verify: bool) -> list[dict[str, Any]]:
    # slots="off": the free-form pass alone (test_slot_extraction.py verifies the slot card's facts)
    extractor = LlmExtractor(LlmSettings("openai/qwen", script.base, attempts=2), verify=verify, slots="off")
    records = read_records(json.dumps(CONVERSATION).encode(), "locomo")
    return list(Ingestor(store, extractor).run(records))


def test_a_fact_the_blind_question_does_not_confirm_is_dropped_with_its_reason(
        store: pmem.Store, scripted: Script) -> None:
    receipts = ingest(store, scripted, verify=True)
    assert {c.key: c.value for c in store.frontier()} == {
        "nora.job": "nurse at the city hospital", "iker.cat_names": "Miso and Tofu"}
    why = ("dropped fact 'iker.hobbies' = 'Herons': not confirmed: asked blind, the model found no answer in the "
           "record ('not stated')")
    assert [(r["record"], r["reason"]) for r in receipts if r["key"] == FAILURE_KEY] == [(2, why)]
    assert [e["reason"] for e in store.log() if e["key"] == FAILURE_KEY] == [why]


def test_without_the_pass_the_same_answers_write_the_loose_fact(store: pmem.Store, scripted: Script) -> None:
    ingest(store, scripted, verify=False)
    assert store.get("iker.hobbies").value == "Herons"


def test_an_answer_that_names_something_else_drops_the_fact(store: pmem.Store, scripted: Script) -> None:
    scripted.answers["what is Nora's job?"] = '{"answer": "a new job"}'  # none of the value's words
    ingest(store, scripted, verify=True)
    assert store.get("nora.job").value is None


def test_an_unusable_verification_answer_drops_the_fact_after_the_retries(
        store: pmem.Store, scripted: Script) -> None:
    scripted.answers["what is Nora's job?"] = "a nurse, I think"  # no JSON, twice
    receipts = ingest(store, scripted, verify=True)
    assert store.get("nora.job").value is None
    assert [r["reason"] for r in receipts if r["record"] == 1] == [
        "dropped fact 'nora.job' = 'nurse at the city hospital': unverified: llm output unusable after 2 "
        "attempts: no JSON object in the output"]


def test_a_verification_answer_is_bounded_and_the_extraction_answer_is_not_by_default(
        store: pmem.Store, scripted: Script) -> None:
    ingest(store, scripted, verify=True)
    assert sorted(set(scripted.calls), key=str) == [("answer", MAX_ANSWER_TOKENS), ("facts", None)]
