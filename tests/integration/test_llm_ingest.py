"""The LLM extractor and annotator through the real litellm and a real OpenAI-compatible server on 127.0.0.1
(tests/chat_server.py), which answers each scripted model its exact answers.

Malformed answers included, every record ends as written facts, as a ``noop`` event in the log with its
reason, or (nothing to write) a receipt with a reason: 0 uncaught exceptions, 0 silent drops.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

import pmem
from pmem.adapters.llm.client import LlmSettings
from pmem.adapters.llm.extractor import LlmAnnotator, LlmExtractor, LlmKeyJudge
from pmem.adapters.service.ingest import FAILURE_KEY, Ingestor, Record, make_annotator, make_extractor
from pmem.domain.errors import ExtractorNotConfigured
from pmem.domain.extraction.annotate import EMPTY, CellSnapshot
from pmem.domain.extraction.facts import Extraction, Fact
from tests.chat_server import Answer, ChatServer, Failure, Script, chat_server


class Models:
    """Scripted models on one real chat server: each :meth:`settings` names a model of its own."""

    def __init__(self, server: ChatServer, script: Script) -> None:
        self.server, self.script = server, script

    def settings(self, *answers: Answer) -> LlmSettings:
        """A fresh model that answers ``answers`` in turn (the last one again for any later call)."""
        name = self.script.add(f"m-{len(self.script.answers) + 1}", *answers)
        return LlmSettings(f"openai/{name}", self.server.base)

    def sent(self, settings: LlmSettings) -> list[dict[str, Any]]:
        """The requests that reached the server for ``settings``' model, as JSON on the wire."""
        return [r for r in self.server.requests if f"openai/{r['model']}" == settings.model]


@pytest.fixture
def models() -> Iterator[Models]:
    script = Script()
    with chat_server(script) as server:
        yield Models(server, script)


def facts(*items: tuple[str, str, str]) -> str:
    return json.dumps({"facts": [{"key": k, "value": v, "status": s} for k, v, s in items]})


class PerRecord:
    """A real extractor that gives each record its own scripted LlmExtractor (one per record number)."""

    name = "llm"

    def __init__(self, answers: Sequence[Sequence[Answer]], models: Models) -> None:
        # verify=False, slots="off": these scripts are free-form extraction answers only; the verification
        # pass and the slot card have their own tests
        self.extractors = [LlmExtractor(models.settings(*a), verify=False, slots="off") for a in answers]

    def extract(self, text: str, record: int) -> Extraction:
        return self.extractors[record - 1].extract(text, record)


MALFORMED: list[list[Answer]] = [
    [facts(("home city", "Porto", "asserted"))],
    ["```json\n" + facts(("5k pb", "25:50", "asserted")) + "\n```"],
    ["Sure {here}: " + facts(("5k pb", "24:59", "hedged")) + " {end}"],
    ['{"facts": [{"key": "car", "value": "Vol'],  # truncated, every attempt
    [json.dumps({"facts": [{"key": "blob", "value": "x" * 1_000_000, "status": "asserted"}]})],
    [r'{"facts": [{"key": "folder", "value": "C:\docs", "status": "asserted", "invented": 1}]}'],
    ["not json at all", facts(("dog", "Rex", "asserted"))],  # recovered on the retry
    [Failure(429, "rate limited")],  # the call itself fails every time (HTTP 429: a RateLimitError)
    ['{"facts": []}'],
    [json.dumps({"facts": [{"key": "pb_27_12", "value": "27:12", "status": "asserted"}]})],
]


TEXTS = ["My home city is Porto.", "My 5K PB is 25:50.", "I think my 5K PB is 24:59 now.", "My car is a Volvo.",
         "A long blob.", r"My folder is C:\docs.", "My dog is Rex.", "Rate limited.", "Nothing to note.",
         "My PB is 27:12."]  # each record says what its scripted answer proposes (grounding keeps only that)


def test_malformed_answers_give_no_exception_and_no_silent_drop(store: pmem.Store, models: Models) -> None:
    records = [Record(i, t) for i, t in enumerate(TEXTS, 1)]
    per_record = PerRecord(MALFORMED, models)
    receipts = list(Ingestor(store, per_record).run(records))
    assert {r["record"] for r in receipts} == set(range(1, len(MALFORMED) + 1))  # every record answered
    for r in receipts:
        assert r["applied"] or r["reason"], r  # every unapplied receipt says why
    failures = [r for r in receipts if r["key"] == FAILURE_KEY]
    assert sorted(r["record"] for r in failures) == [4, 5, 8, 10]
    logged = [e for e in store.log() if e["key"] == FAILURE_KEY]
    assert [e["event_index"] for e in logged] == [r["event_index"] for r in failures]
    assert all(e["op"] == "noop" and e["reason"] for e in logged)
    assert "truncated" in logged[0]["reason"] and "after 3 attempts" in logged[0]["reason"]
    assert "over 64 KiB" in logged[1]["reason"] and "RateLimitError" in logged[2]["reason"]
    assert store.get("home city").value == "Porto" and store.get("folder").value == r"C:\docs"
    assert store.get("dog").value == "Rex"
    assert store.get("5k pb").status == "contested"  # the hedged 24:59 contests 25:50
    assert [r["reason"] for r in receipts if r["record"] == 9] == ["the model found no facts"]
    assert FAILURE_KEY not in {c.key for c in store.frontier()}
    # on the wire: a parsed answer is asked for once (the blob is dropped after parsing), a truncated one
    # 3 times, the prose one twice (recovered on the retry), a call that fails 3 times
    asked = [len(models.sent(x.model.settings)) for x in per_record.extractors]
    assert asked == [1, 1, 1, 3, 1, 1, 2, 3, 1, 1]


def test_a_retry_feeds_back_and_stops_at_the_first_usable_answer(models: Models) -> None:
    first = "```json\n{\"facts\": ["
    x = LlmExtractor(models.settings(first, facts(("city", "Porto", "asserted")), "never asked"), verify=False,
                     slots="off")
    assert [f.value for f in x.extract("I live in Porto.", 1).facts] == ["Porto"]
    assert x.model.calls == 2
    sent = models.sent(x.model.settings)
    assert len(sent) == 2 and sent[1]["messages"][:2] == sent[0]["messages"]  # the same question, then
    assert sent[1]["messages"][2] == {"role": "assistant", "content": first}  # its unusable answer and why
    assert sent[1]["messages"][3]["role"] == "user"
    assert sent[1]["messages"][3]["content"].startswith("That answer was unusable (")
    assert all(r["response_format"]["type"] == "json_schema" for r in sent)  # JSON under the schema, each time


def fact(value: str = "25:50", confidence: float = 0.9) -> Fact:
    return Fact("5k_pb", value, "asserted", "accept", confidence, 1, f"My 5K PB is {value}.", "llm")


def test_the_llm_annotators_choice_is_validated_like_any_annotators(models: Models) -> None:
    contest_empty = LlmAnnotator(models.settings('{"op": "contest", "why": "unsure"}'))(fact(), EMPTY)
    assert contest_empty.op == "contest" and contest_empty.invalid == "contest needs a head: the cell is empty"
    low = LlmAnnotator(models.settings('{"op": "accept", "why": "newer"}'))(fact("24:00", 0.4),
                                                                     CellSnapshot("25:50", "active"))
    assert low.op == "contest" and "lowered to contest" in low.why and low.valid


def test_an_unusable_annotator_answer_falls_back_to_the_rules_and_says_so(models: Models) -> None:
    a = LlmAnnotator(models.settings('{"op": "delete"}', "nope", '{"op": "merge"}'))(fact("24:00"),
                                                                                CellSnapshot("25:50", "active"))
    assert a.op == "accept" and a.why.startswith("llm output unusable after 3 attempts") and "rule-based" in a.why


def test_llm_ingest_needs_a_configured_model() -> None:
    with pytest.raises(ExtractorNotConfigured, match="give --model"):
        make_extractor("llm", None)
    with pytest.raises(ExtractorNotConfigured, match="give --model"):
        make_annotator("llm", None)
    with pytest.raises(ExtractorNotConfigured, match="no model configured"):
        LlmSettings(" ")


def test_a_bare_model_alias_with_an_api_base_means_an_openai_compatible_server() -> None:
    assert LlmSettings("qwen", "http://127.0.0.1:9/v1").model == "openai/qwen"
    assert LlmSettings("ollama/qwen", "http://127.0.0.1:9").model == "ollama/qwen"
    assert LlmSettings("gpt-4o-mini").model == "gpt-4o-mini"


def test_the_key_judge_asks_the_model_only_what_the_rules_cannot_settle(models: Models) -> None:
    judge = LlmKeyJudge(models.settings('{"same": false, "why": "model says no"}'))
    # Identical after normalisation and synonyms (pb = personal best, 5k = 5 km): merged, model not asked.
    assert judge("5k_pb", "personal_best_over_5_km") == (True, "identical after normalisation and synonyms")
    # Different subjects never merge, whatever a model would say.
    assert judge("anna.home_city", "ben.home_city") == (False, "different subjects")
    # A contrastive qualifier never merges, whatever a model would say.
    same, why = judge("home_city", "work_city")
    assert not same and not why.startswith("llm:")
    # Anything else is the model's call.
    assert judge("commute_time", "commute_duration") == (False, "llm: model says no")
    assert len(models.server.requests) == 1  # only that last pair reached the model
