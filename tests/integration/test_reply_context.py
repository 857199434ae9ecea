"""The turn a turn answers, shown to the LLM extractor as context (docs/ingest.md#reply-context), through the
real litellm and a real OpenAI-compatible HTTP server on 127.0.0.1 (tests/chat_server.py).

"It has been six years now" says little alone; after "How long have you lived in Braga?" it says how long. With
``reply_context`` the model sees that question above the message, and the prompt says it is context: a value
taken from it (``Braga``, which only the question says) is still dropped as ungrounded. Without it (the
default) neither the line nor the note is sent, so recorded answers to the default prompt still replay.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import pmem
from pmem.adapters.llm.client import LlmSettings
from pmem.adapters.llm.extractor import EXTRACT_PROMPT, REPLY_NOTE, LlmExtractor
from pmem.adapters.service.ingest import FAILURE_KEY, Ingestor
from pmem.adapters.sources.records import read_records
from tests.chat_server import chat_server

DIALOGUE = json.dumps({"sample_id": "rc", "conversation": {  # not LoCoMo text: written for this test
    "speaker_a": "Iker", "speaker_b": "Ada", "session_1_date_time": "10:05 am on 3 March, 2024",
    "session_1": [
        {"speaker": "Iker", "dia_id": "D1:1", "text": "How long have you lived in Braga?"},
        {"speaker": "Ada", "dia_id": "D1:2", "text": "It has been six years now, since my first job."}]}}).encode()
FACTS = json.dumps({"facts": [
    {"subject": "Ada", "attribute": "time_lived_there", "value": "six years", "evidence": "It has been six years"},
    {"subject": "Ada", "attribute": "city", "value": "Braga", "evidence": "lived in Braga"}]})


@pytest.fixture
def model() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    requests: list[dict[str, Any]] = []

    def reply(request: dict[str, Any]) -> str:
        requests.append(request)
        name = request["response_format"]["json_schema"]["name"]
        return FACTS if name == "facts" else '{"answer": "six years"}'

    with chat_server(reply) as server:
        yield server.base, requests


def ingest(store: pmem.Store, base: str, reply_context: bool) -> list[dict[str, Any]]:
    extractor = LlmExtractor(LlmSettings("openai/qwen", base, attempts=2), slots="off", reply_context=reply_context)
    return list(Ingestor(store, extractor).run(read_records(DIALOGUE, "locomo")))


def test_the_turn_before_is_shown_as_context_and_is_never_a_source_of_values(
        store: pmem.Store, model: tuple[str, list[dict[str, Any]]]) -> None:
    base, requests = model
    receipts = ingest(store, base, reply_context=True)
    system, user = (m["content"] for m in requests[0]["messages"][:2])  # the question turn is never sent
    assert system == EXTRACT_PROMPT + REPLY_NOTE
    assert user == ("Date: 2024-03-03\nIn reply to: Iker: How long have you lived in Braga?\n"
                    "Speaker: Ada (talking to Iker)\nMessage: It has been six years now, since my first job.")
    assert all(r["messages"][0]["content"].endswith(REPLY_NOTE) for r in requests)  # the verification too
    assert store.get("ada.time_lived_there").value == "six years"
    assert store.get("ada.city").value is None
    assert [r["reason"] for r in receipts if r["key"] == FAILURE_KEY] == [
        "dropped fact 2 (key 'city'): ungrounded: the value's words are not in the record"]


def test_without_reply_context_the_model_sees_the_message_alone(
        store: pmem.Store, model: tuple[str, list[dict[str, Any]]]) -> None:
    base, requests = model
    ingest(store, base, reply_context=False)
    system, user = (m["content"] for m in requests[0]["messages"][:2])
    assert system == EXTRACT_PROMPT
    assert "In reply to" not in user and "Braga" not in user
    assert not any(REPLY_NOTE in r["messages"][0]["content"] for r in requests)
