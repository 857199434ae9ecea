"""The optional LLM reader against a local model server (opt-in: skipped unless PMEM_LLM_BASE is set)."""

from __future__ import annotations

import os

import pytest

from adapters.llm_reader import LLMReader
from domain.errors import ReaderNotConfigured


def test_without_a_model_server_the_llm_reader_says_it_is_not_configured() -> None:
    if os.environ.get("PMEM_LLM_BASE"):
        pytest.skip("a model server is configured")
    with pytest.raises(ReaderNotConfigured, match="PMEM_LLM_BASE"):
        LLMReader.from_env()


@pytest.mark.llm
@pytest.mark.skipif(not os.environ.get("PMEM_LLM_BASE"), reason="needs a local model server (PMEM_LLM_BASE)")
def test_the_llm_reader_answers_from_the_cell_context() -> None:
    answer = LLMReader.from_env().answer("Where is mug 1 now?", "mug_1.location = countertop 1")
    assert "countertop" in answer.lower()
