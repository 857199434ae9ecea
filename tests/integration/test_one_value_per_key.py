"""One value per key from a record (docs/ingest.md#one-value-per-key), through the real litellm and a real
OpenAI-compatible HTTP server on 127.0.0.1 (tests/chat_server.py), into a real store.

A model's facts about one record are a set: when it gives one key several values, the first is written and
the others are dropped, each on a receipt with why, so the current value does not depend on the order the
model listed them in. The template extractor reads a turn's sentences in the order they were said, so its
later value for a key is a later statement and supersedes the earlier one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import pmem
from pmem.adapters.llm.client import LlmSettings
from pmem.adapters.llm.extractor import LlmExtractor, one_value_per_key
from pmem.adapters.service.ingest import FAILURE_KEY, Ingestor
from pmem.adapters.sources.records import read_records
from pmem.domain.extraction.facts import Extraction, Fact
from pmem.domain.extraction.template import DialogueTemplateExtractor
from tests.chat_server import chat_server


def turns(*texts: str) -> bytes:
    """A conversation of LoCoMo's shape (not LoCoMo text: written for this test), every turn Ada's."""
    session = [{"speaker": "Ada", "dia_id": f"D1:{i}", "text": t} for i, t in enumerate(texts, 1)]
    return json.dumps({"sample_id": "one", "conversation": {
        "speaker_a": "Ada", "speaker_b": "Iker", "session_1_date_time": "10:05 am on 3 March, 2024",
        "session_1": session}}).encode()


GIFT = "This bracelet is a gift from my aunt in my home town, Braga."
FACTS = json.dumps({"facts": [  # three values for one attribute, as the local model answers such a turn
    {"subject": "Ada", "attribute": "gift", "value": "bracelet", "evidence": "This bracelet is a gift"},
    {"subject": "Ada", "attribute": "gift", "value": "aunt", "evidence": "a gift from my aunt"},
    {"subject": "Ada", "attribute": "gift", "value": "Braga", "evidence": "my home town, Braga"}]})


@pytest.fixture
def model() -> Iterator[tuple[str, list[str]]]:
    asked: list[str] = []

    def reply(request: dict[str, Any]) -> str:
        name = request["response_format"]["json_schema"]["name"]
        asked.append(name)
        return FACTS if name == "facts" else '{"answer": "the bracelet from her aunt in Braga"}'

    with chat_server(reply) as server:
        yield server.base, asked


def test_the_first_of_several_values_for_one_key_is_written_and_the_others_are_on_receipts(
        store: pmem.Store, model: tuple[str, list[str]]) -> None:
    base, asked = model
    extractor = LlmExtractor(LlmSettings("openai/qwen", base, attempts=2), slots="off")
    receipts = list(Ingestor(store, extractor).run(read_records(turns(GIFT), "locomo")))
    assert asked == ["facts", "answer", "answer", "answer"]  # every value verified, then one kept
    assert [e["value"] for e in store.log() if e["key"] == "ada.gift"] == ["bracelet"]
    assert store.get("ada.gift").value == "bracelet"
    assert [r["reason"] for r in receipts if r["key"] == FAILURE_KEY] == [
        f"dropped fact 'ada.gift' = {v!r}: the record already gave 'ada.gift' the value 'bracelet' "
        "(one value per key from a record: the first is kept)" for v in ("aunt", "Braga")]


def test_a_later_sentence_of_a_turn_still_updates_the_key_with_the_template_extractor(store: pmem.Store) -> None:
    text = "My city is now Porto. Sorry, my city is now Braga."
    list(Ingestor(store, DialogueTemplateExtractor()).run(read_records(turns(text), "locomo")))
    history = store.history("ada.city")
    assert [(v.value, v.status) for v in history.versions] == [("Porto", "contradicted"), ("Braga", "active")]


def fact(key: str, value: str) -> Fact:
    return Fact(key, value, "asserted", "accept", 0.9, 1, "text", "llm")


def test_one_value_per_key_keeps_the_first_of_each_key_in_order_and_says_why_for_the_rest() -> None:
    x = Extraction(1, "text", facts=(fact("a.x", "1"), fact("a.y", "2"), fact("a.x", "3"), fact("a.x", "1")),
                   dropped=("earlier",))
    got = one_value_per_key(x)
    assert [(f.key, f.value) for f in got.facts] == [("a.x", "1"), ("a.y", "2")]
    assert got.dropped == ("earlier",
                           "fact 'a.x' = '3': the record already gave 'a.x' the value '1' "
                           "(one value per key from a record: the first is kept)",
                           "fact 'a.x' = '1': the record already gave 'a.x' the value '1' "
                           "(one value per key from a record: the first is kept)")
    single = Extraction(1, "text", facts=(fact("a.x", "1"),))
    assert one_value_per_key(single) is single
