"""docs/examples/agent.py, the example agent, driven by a scripted model: a real
OpenAI-compatible chat server on 127.0.0.1 (tests/chat_server.py) that first calls tools (remember, then
read), then answers, against a real ``pmem mcp`` over stdio. litellm sends every turn over HTTP to that
server and nowhere else; what the model was sent is asserted on the JSON the server received."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import pmem
from tests.chat_server import Answer, ChatServer, Script, chat_server

ROOT = Path(__file__).resolve().parents[2]


def load_agent() -> ModuleType:
    spec = importlib.util.spec_from_file_location("example_agent", ROOT / "docs" / "examples" / "agent.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tool_call(n: int, name: str, **args: Any) -> dict[str, Any]:
    return {"id": f"call_{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


class Model:
    """The scripted model's server: one answer per turn, in order; ``sent`` is each request as received."""

    def __init__(self, server: ChatServer, script: Script) -> None:
        self.server, self.script = server, script

    def ask(self, agent: ModuleType, question: str, db: Path, *turns: Answer, **options: Any) -> str:
        """The agent's answer to ``question``, its model answering ``turns`` in order."""
        self.script.add("scripted", *turns)
        return str(asyncio.run(agent.ask(question, db=str(db), model="openai/scripted", api_base=self.server.base,
                                         **options)))

    @property
    def sent(self) -> list[dict[str, Any]]:
        return self.server.requests


@pytest.fixture
def model() -> Iterator[Model]:
    script = Script()
    with chat_server(script) as server:
        yield Model(server, script)


# Slow: the whole example agent, with its MCP server and model server as processes.
@pytest.mark.slow
def test_the_example_agent_remembers_reads_and_answers_through_pmem_mcp(tmp_path: Path, model: Model) -> None:
    agent = load_agent()
    db = tmp_path / "mem.db"
    answer = model.ask(
        agent, "My 5K PB is now 25:50. What is it?", db,
        {"tool_calls": [tool_call(1, "remember", text="My 5K PB is now 25:50.")]},
        {"tool_calls": [tool_call(2, "read", question="What is my 5K PB?", k=1), tool_call(3, "get", key="")]},
        "Your 5K PB is 25:50.")
    assert answer == "Your 5K PB is 25:50."
    assert len(model.sent) == 3
    tools = {t["function"]["name"]: t["function"] for t in model.sent[0]["tools"]}
    assert {"remember", "read", "get", "apply"} <= set(tools)
    assert tools["read"]["parameters"]["properties"]["question"]["type"] == "string"
    results = [m for m in model.sent[2]["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in results] == ["call_1", "call_2", "call_3"]
    assert results[0]["content"] == "#1 accept 5k_pb -> 25:50 (active)"
    assert results[1]["content"] == "5k_pb = 25:50"
    assert results[2]["content"].startswith("ERROR: ") and "'key' is empty" in results[2]["content"]
    with pmem.open(db) as store:
        assert store.get("5k pb").value == "25:50"


def test_a_tool_call_written_as_text_is_run_too(tmp_path: Path, model: Model) -> None:
    """A small model whose server does not parse tool calls writes the call as JSON text: it is run, and the
    result goes back to the model as the next user turn."""
    agent = load_agent()
    written = json.dumps({"name": "remember", "arguments": {"text": "My 5K PB is now 25:50.", "namespace": None}})
    answer = model.ask(agent, "My 5K PB is now 25:50.", tmp_path / "mem.db", f"```json\n{written}\n```",
                       "Noted: 25:50.")
    assert answer == "Noted: 25:50."
    assert model.sent[1]["messages"][-1] == {"role": "user",
                                             "content": "Result of remember: #1 accept 5k_pb -> 25:50 (active)"}
    assert agent.written_calls("Your PB is 25:50.", model.sent[0]["tools"]) == []


def test_qwen_tagged_tool_calls_written_as_text_are_run_in_order(tmp_path: Path, model: Model) -> None:
    """Qwen2.5's own format, ``<tool_call>{...}</tool_call>``, as the local server hands it back when it
    leaves the text unparsed: every tagged call is run, in order, each result a user turn."""
    agent = load_agent()
    first = json.dumps({"name": "remember", "arguments": {"text": "My 5K PB is now 25:50."}})
    second = json.dumps({"name": "get", "arguments": json.dumps({"key": "5k pb"})})
    tagged = f"<tool_call>\n{first}\n</tool_call>\n<tool_call>\n{second}\n</tool_call>"
    answer = model.ask(agent, "My 5K PB is now 25:50.", tmp_path / "mem.db", tagged, "Your 5K PB is 25:50.")
    assert answer == "Your 5K PB is 25:50."
    assert [m["content"] for m in model.sent[1]["messages"][-2:]] == [
        "Result of remember: #1 accept 5k_pb -> 25:50 (active)", "Result of get: 5k_pb = 25:50"]


TOOLS = [{"type": "function", "function": {"name": n, "parameters": {}}} for n in ("remember", "read")]


@pytest.mark.parametrize(("text", "calls"), [
    ('<tool_call>{"name": "read", "arguments": {"question": "PB?"}}</tool_call>',
     [{"name": "read", "arguments": {"question": "PB?"}}]),
    ('<tool_call>\n{"name": "read", "parameters": {"question": "PB?", "k": null}}', [{"name": "read",
                                                                                   "arguments": {"question": "PB?"}}]),
    ('```\n{"name": "remember", "arguments": "{\\"text\\": \\"hi\\"}"}\n```', [{"name": "remember",
                                                                                     "arguments": {"text": "hi"}}]),
    # Qwen2.5-Coder-1.5B on the local route, 2026-12-02: braces doubled, as in a template
    ('{{"name": "read", "arguments": {"question": "My 5K PB?", "budget": 10, "namespace": null}}}',
     [{"name": "read", "arguments": {"question": "My 5K PB?", "budget": 10}}]),
    ('Sure, I will remember that: {"name": "remember", "arguments": {"text": "PB 25:50"}}',
     [{"name": "remember", "arguments": {"text": "PB 25:50"}}]),
    ("Your PB is {25:50}.", []),
    ('{"name": "delete_everything", "arguments": {}}', []),
    ('<tool_call>{"name": "read", "arguments": {}}</tool_call><tool_call>not json</tool_call>', []),
    ('{"answer": 42}', []), ("Your PB is 25:50.", []), ("", []), (None, []),
])
def test_which_texts_are_tool_calls(text: str | None, calls: list[dict[str, Any]]) -> None:
    assert load_agent().written_calls(text, TOOLS) == calls


def test_mcp_tools_become_openai_function_tools() -> None:
    agent = load_agent()

    class Tool:
        name, description, input_schema = "get", "one fact", {"type": "object", "properties": {}}

    assert agent.openai_tools([Tool()]) == [{"type": "function", "function": {
        "name": "get", "description": "one fact", "parameters": {"type": "object", "properties": {}}}}]


def test_only_the_named_tools_are_handed_to_the_model(tmp_path: Path, model: Model) -> None:
    agent = load_agent()
    answer = model.ask(agent, "Hello.", tmp_path / "mem.db", "Nothing to do.", only=["read", "remember"])
    assert answer == "Nothing to do."
    assert sorted(t["function"]["name"] for t in model.sent[0]["tools"]) == ["read", "remember"]
