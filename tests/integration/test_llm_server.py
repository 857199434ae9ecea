"""Against a real model server (scripts/local-llm.sh): runs only when PMEM_LLM_BASE is set."""

from __future__ import annotations

import os

import pytest

import pmem
from pmem.adapters.llm.client import LlmSettings
from pmem.adapters.llm.extractor import LlmExtractor, LlmKeyJudge
from pmem.adapters.service.ingest import Ingestor
from pmem.adapters.sources.records import read_records

BASE = os.environ.get("PMEM_LLM_BASE")
pytestmark = [pytest.mark.llm, pytest.mark.skipif(not BASE, reason="PMEM_LLM_BASE not set (scripts/local-llm.sh)")]


def settings() -> LlmSettings:
    return LlmSettings(os.environ.get("PMEM_LLM_MODEL", "openai/qwen"), BASE, timeout_s=120)


def test_the_local_model_extracts_a_value_independent_key_for_a_short_message() -> None:
    x = LlmExtractor(settings(), slots="off").extract("My home city is now Porto.", 1)  # the free-form pass's key
    assert not x.failed, x.reason
    assert any(f.value == "Porto" and "porto" not in f.key for f in x.facts)


def test_the_local_model_judges_a_key_paraphrase_and_a_near_miss() -> None:
    judge = LlmKeyJudge(settings())
    assert judge("5k_pb", "personal_best_over_5_km")[0] is True
    assert judge("home_city", "work_city")[0] is False


def test_ingest_through_the_local_model_records_every_record(store: pmem.Store) -> None:
    text = b"My home city is now Porto.\nWe had pasta for lunch.\n"
    receipts = list(Ingestor(store, LlmExtractor(settings())).run(read_records(text, "lines")))
    assert {r["record"] for r in receipts} == {1, 2}
