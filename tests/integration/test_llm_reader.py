"""The optional LLM reader against a local model server (opt-in: skipped unless PMEM_LLM_BASE is set)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pmem.adapters.llm.reader import ANSWER_PROMPT, LOOKUP_PROMPT, LLMReader
from pmem.domain.errors import ReaderNotConfigured
from tests.chat_server import ChatServer, Script, chat_server


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


@pytest.fixture
def script() -> Iterator[tuple[Script, ChatServer]]:
    """A real OpenAI-compatible server on 127.0.0.1 answering from a script per model name."""
    answers = Script()
    with chat_server(answers) as server:
        yield answers, server


def scripted(script: tuple[Script, ChatServer], *answers: str) -> LLMReader:
    """The real litellm call path over HTTP, the server answering ``answers`` in turn (the last repeats)."""
    answers_for, server = script
    return LLMReader(server.base, answers_for.add("qwen", *answers))


def test_the_llm_reader_takes_the_models_answer_through_litellm(script: tuple[Script, ChatServer]) -> None:
    reader = scripted(script, "```countertop 1```")
    assert reader.answer("Where is mug 1 now?", "mug_1.location = countertop 1") == "countertop 1"
    assert reader.calls == 1
    (sent,) = script[1].requests  # the JSON on the wire: the prompt, at temperature 0, its answer bounded
    assert sent["model"] == "qwen" and sent["temperature"] == 0 and sent["max_tokens"] == reader.max_tokens
    assert sent["messages"] == [{"role": "user", "content": ANSWER_PROMPT.format(
        context="mug_1.location = countertop 1", question="Where is mug 1 now?")}]


def test_the_llm_planner_drives_iterative_readout_until_it_says_done(
        tmp_path: Path, script: tuple[Script, ChatServer]) -> None:
    import pmem
    from pmem.adapters.embedders.hashing_embedder import HashingEmbedder
    from pmem.adapters.service.reader import Reader

    with pmem.open(tmp_path / "mem.db", embedder=HashingEmbedder()) as store:
        store.apply([{"op": "accept", "key": "mug_1.location", "value": "countertop 1"},
                     {"op": "accept", "key": "countertop_1.room", "value": "kitchen"}])
        planner = scripted(script, "countertop 1 room", "DONE")
        result = Reader(store, planner=planner).read_cells("Which room is mug 1 in?", k=1)
    assert result.lookups == ("countertop 1 room",)  # one follow-up, then the model said DONE
    assert planner.calls == 2
    sent = [r["messages"][0]["content"] for r in script[1].requests]
    assert len(sent) == 2 and all(s.startswith(LOOKUP_PROMPT.split("{context}")[0]) for s in sent)
    assert "countertop_1.room = kitchen" not in sent[0] and "countertop_1.room = kitchen" in sent[1]
    assert "mug_1.location = countertop 1" in result.context and "countertop_1.room = kitchen" in result.context
