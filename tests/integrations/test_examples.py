"""The LangGraph agent and the Mem0-style script of docs/examples/ run end to end in CI on the model's
answers recorded from a real run on the local model route (docs/examples/recorded/), served to litellm's real
requests by a real OpenAI-compatible server on 127.0.0.1 (tests/chat_server.py): no model, no network. A
request the recording does not hold is refused, and every recorded answer must be used."""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import pmem
from pmem.integrations.langgraph import PMemStore
from pmem.integrations.mem0 import Memory
from tests.chat_server import Failure, chat_server

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
MESSAGES = ["My 5K PB is 27:12.", "My 5K PB is now 25:50.", "What is my 5K PB?"]


def example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def replayed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Callable[[str], Any]]:
    """A real OpenAI-compatible server on 127.0.0.1 answering from ``docs/examples/recorded/NAME.json``
    (``recorded.Replay``); ``use(NAME)`` gives the replay, its server's URL as ``replay.base``."""
    monkeypatch.setenv("PMEM_EMBEDDER", "hashing")
    monkeypatch.setenv("PMEM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PMEM_LLM_KEY", "none")
    recorded = example("recorded")
    with ExitStack() as servers:

        def use(name: str) -> Any:
            replay = recorded.Replay(EXAMPLES / "recorded" / f"{name}.json")

            def reply(request: dict[str, Any]) -> Any:
                answer = replay(request)
                return Failure(400, replay.wrong[-1]) if answer is None else answer

            replay.base = servers.enter_context(chat_server(reply)).base
            return replay

        yield use


def test_the_langgraph_agent_remembers_supersedes_and_answers(replayed: Callable[[str], Any], tmp_path: Path) -> None:
    replay = replayed("langgraph_agent")
    db = tmp_path / "agent.db"
    replies = example("langgraph_agent").main(["--db", str(db), "--user", "alice", "--api-base", replay.base,
                                               *MESSAGES])
    assert replay.wrong == [] and replay.left == []
    assert replies == ["remembered pb: 27:12", "remembered pb: 25:50", "Your 5K PB is 25:50."]
    with pmem.open(db) as store:
        memories = PMemStore(store)
        item = memories.get(("users", "alice", "memories"), "pb")
        assert item is not None and item.value == {"topic": "pb", "value": "25:50"}
        versions = memories.history(("users", "alice", "memories"), "pb").versions
        assert [v.status for v in versions] == ["superseded", "active"]


def test_the_mem0_script_on_the_llm_extractor(replayed: Callable[[str], Any], tmp_path: Path) -> None:
    """The recorded run: the model first read "5K" as the PB, the verification pass (asked again, it said
    27:12) refused that, so nothing false was written; the second statement was added and answered from."""
    replay = replayed("mem0_chat")
    db = tmp_path / "mem0.db"
    said = ["My 5K PB is now 27:12.", "My 5K PB is now 25:50.", "What is my 5K PB?"]
    replies = example("mem0_chat").main(["--db", str(db), "--user", "alice", "--extractor", "llm",
                                         "--model", "openai/qwen", "--api-base", replay.base, *said])
    assert replay.wrong == [] and replay.left == []
    assert replies == ["(nothing to remember)", "ADD pb: 25:50", "Your 5K PB is 25:50."]
    with Memory(db=str(db)) as memory:
        assert [m["memory"] for m in memory.get_all(user_id="alice")["results"]] == ["pb: 25:50"]
        assert [h["new_memory"] for h in memory.history("alice/pb")] == ["25:50"]


@pytest.mark.llm
@pytest.mark.skipif(not os.environ.get("PMEM_LLM_BASE"), reason="PMEM_LLM_BASE not set (scripts/local-llm.sh)")
def test_the_langgraph_agent_on_the_local_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The same run as the recorded one, on the real model the recording came from (scripts/local-llm.sh):
    the newer value answers, and the older one is kept in the topic's history."""
    monkeypatch.setenv("PMEM_EMBEDDER", "hashing")
    db = tmp_path / "agent.db"
    replies = example("langgraph_agent").main(["--db", str(db), "--user", "alice", *MESSAGES])
    assert "25:50" in replies[-1] and "27:12" not in replies[-1], replies
    with pmem.open(db) as store:
        items = PMemStore(store).search(("users", "alice", "memories"))
        assert [i.value["value"] for i in items] == ["25:50"], [i.value for i in items]
        versions = PMemStore(store).history(("users", "alice", "memories"), items[0].key).versions
        kept = [(json.loads(v.value)["value"]["value"], v.status) for v in versions]  # each version's item JSON
        assert kept == [("27:12", "superseded"), ("25:50", "active")]
