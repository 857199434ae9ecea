"""An agent whose memory is P-Mem: a model, through litellm's tool calling, drives ``pmem mcp`` over stdio.

    python docs/examples/agent.py "My 5K PB is now 25:50. What was it before?" --db mem.db \\
        --model openai/qwen --api-base http://127.0.0.1:8080/v1

The MCP server's tools (remember, read, get, history, ...) are listed through the SDK's client session and
handed to the model as OpenAI-style function tools; each tool call the model makes is sent to the server,
and its text result goes back to the model, until the model answers without a tool call.

The token is ``$PMEM_TOKEN`` (``pmem keys add ...``); without one the server is started with
``--insecure-local``, which works only on a store that has no credential.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm's price list from the package, not the web
import litellm  # noqa: E402
from mcp import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

SYSTEM = ("You are an assistant with a long-term memory (the tools). Before answering a question about the "
          "user, call `read` with the question. When the user tells you something about themselves, call "
          "`remember` with their words. Claims are marked (source, trust N): believe the higher trust. "
          "Answer briefly.")
MAX_TURNS = 6
# temperature 0 in every turn: a tool call wants the model's most likely reading, and a small model
# sampled at its server's default (0.8 on llama.cpp) wandered off the format.

Completion = Callable[..., Awaitable[Any]]


def pmem_command() -> str:
    """The ``pmem`` next to this Python (a virtual environment's), else the one on PATH."""
    here = Path(sys.executable).with_name("pmem")
    return str(here) if here.exists() else shutil.which("pmem") or "pmem"


def openai_tools(tools: list[Any]) -> list[dict[str, Any]]:
    """MCP tools as OpenAI/litellm function tools: the same name, description and JSON schema."""
    return [{"type": "function", "function": {"name": t.name, "description": t.description or "",
                                              "parameters": t.input_schema}} for t in tools]


async def call(session: ClientSession, tool_call: Any) -> dict[str, Any]:
    """Run one tool call of the model on the MCP server; the tool message that answers it."""
    try:
        args = json.loads(tool_call.function.arguments or "{}")
        result = await session.call_tool(tool_call.function.name, args)
        text = "\n".join(c.text for c in result.content if c.type == "text")
        content = f"ERROR: {text}" if result.is_error else text
    except json.JSONDecodeError as e:  # the model wrote arguments that are not JSON: tell it
        content = f"ERROR: arguments are not JSON: {e}"
    return {"role": "tool", "tool_call_id": tool_call.id, "content": content}


TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)


def written_calls(content: str | None, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tool calls a model wrote as text instead of as structured ``tool_calls``, as small models do:
    Qwen's own ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (one or more), else the first
    JSON object in the text that names a tool (in a code fence, or with its braces doubled as a template's
    are: ``{{"name": ...}}``). Arguments may also be a JSON string or be called ``parameters``. Only
    calls of known tools count: anything else is the model's answer, and this returns []."""
    text = (content or "").strip()
    names = {t["function"]["name"] for t in tools}
    calls = [_first_call(piece, names) for piece in TAGGED.findall(text) or [text]]
    return [c for c in calls if c is not None] if all(calls) else []


def _first_call(text: str, names: set[str]) -> dict[str, Any] | None:
    """The first ``{"name": TOOL, "arguments": {...}}`` that starts at one of the text's braces."""
    decoder = json.JSONDecoder()
    for start in (i for i, ch in enumerate(text) if ch == "{"):
        try:
            obj, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        args = obj.get("arguments", obj.get("parameters")) if isinstance(obj, dict) else None
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                continue
        if isinstance(obj, dict) and obj.get("name") in names and isinstance(args, dict):
            return {"name": obj["name"], "arguments": {k: v for k, v in args.items() if v is not None}}
    return None


async def ask(question: str, *, db: str, model: str, api_base: str | None = None, token: str | None = None,
              completion: Completion = litellm.acompletion, max_turns: int = MAX_TURNS,
              trace: Callable[[dict[str, Any]], None] = lambda message: None,
              only: Sequence[str] = ()) -> str:
    """The model's answer to ``question``, after the tool calls it chose to make against ``pmem mcp``
    (``trace`` sees every message of the conversation as it is added, the answer last; ``only``: hand
    the model just these tools, a shorter prompt for a small model on a slow machine)."""
    token = token or os.environ.get("PMEM_TOKEN")
    args = ["--db", db, "mcp"] + ([] if token else ["--insecure-local"])
    params = StdioServerParameters(command=pmem_command(), args=args, env={"PMEM_TOKEN": token} if token else None)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = openai_tools([t for t in (await session.list_tools()).tools if not only or t.name in only])
        messages: list[dict[str, Any]] = []

        def add(message: dict[str, Any]) -> None:
            messages.append(message)
            trace(message)

        add({"role": "system", "content": SYSTEM})
        add({"role": "user", "content": question})
        for _ in range(max_turns):
            response = await completion(model=model, messages=messages, tools=tools, api_base=api_base,
                                        api_key=os.environ.get("PMEM_LLM_KEY", "none"), temperature=0)
            message = response.choices[0].message
            written = [] if message.tool_calls else written_calls(message.content, tools)
            if not message.tool_calls and not written:
                trace({"role": "assistant", "content": message.content})
                return str(message.content or "")
            add(message.model_dump(exclude_none=True))
            for w in written:  # the server returned the call as text: its result comes back as the user
                result = await session.call_tool(w["name"], w["arguments"])
                text = "\n".join(c.text for c in result.content if c.type == "text")
                add({"role": "user", "content": f"Result of {w['name']}: {text}"})
            for tool_call in message.tool_calls or ():
                add(await call(session, tool_call))
    return "(no answer: the model kept calling tools)"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("question")
    p.add_argument("--db", default=os.environ.get("PMEM_DB", "pmem.db"))
    p.add_argument("--model", default=os.environ.get("PMEM_LLM_MODEL", "openai/qwen"))
    p.add_argument("--api-base", default=os.environ.get("PMEM_LLM_BASE"))
    p.add_argument("--trace", action="store_true", help="print every message to stderr as it is added")
    p.add_argument("--tools", default="", help="comma list: hand the model only these tools (default: all)")
    a = p.parse_args()

    def trace(message: dict[str, Any]) -> None:
        if a.trace:
            print(json.dumps(message, default=str), file=sys.stderr, flush=True)

    print(asyncio.run(ask(a.question, db=a.db, model=a.model, api_base=a.api_base, trace=trace,
                              only=[t for t in a.tools.split(",") if t])))


if __name__ == "__main__":
    main()
