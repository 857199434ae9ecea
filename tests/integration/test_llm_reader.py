"""The optional LLM reader against a local model server (opt-in: skipped unless PMEM_LLM_BASE is set)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pmem.adapters.llm.reader import LLMReader
from pmem.domain.errors import ReaderNotConfigured


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


def scripted(*answers: str) -> LLMReader:
    """The real litellm call path, answered by litellm's own ``mock_response`` (no server, no network)."""
    return LLMReader("http://127.0.0.1:9/v1", "qwen", mock_responses=answers)


def test_the_llm_reader_takes_the_models_answer_through_litellm() -> None:
    reader = scripted("```countertop 1```")
    assert reader.answer("Where is mug 1 now?", "mug_1.location = countertop 1") == "countertop 1"
    assert reader.calls == 1


def test_the_llm_planner_drives_iterative_readout_until_it_says_done(tmp_path: Path) -> None:
    import pmem
    from pmem.adapters.embedders.hashing_embedder import HashingEmbedder
    from pmem.adapters.service.reader import Reader

    with pmem.open(tmp_path / "mem.db", embedder=HashingEmbedder()) as store:
        store.apply([{"op": "accept", "key": "mug_1.location", "value": "countertop 1"},
                     {"op": "accept", "key": "countertop_1.room", "value": "kitchen"}])
        planner = scripted("countertop 1 room", "DONE")
        result = Reader(store, planner=planner).read_cells("Which room is mug 1 in?", k=1)
    assert result.lookups == ("countertop 1 room",)  # one follow-up, then the model said DONE
    assert planner.calls == 2
    assert "mug_1.location = countertop 1" in result.context and "countertop_1.room = kitchen" in result.context
