"""A LangGraph agent whose long-term memory is P-Mem, through ``PMemStore`` (docs/integrations.md#langgraph).

    python docs/examples/langgraph_agent.py --db mem.db --user alice \\
        "My 5K PB is 27:12." "My 5K PB is now 25:50." "What is my 5K PB?"

Each message runs through a compiled graph. A statement goes to ``remember``: the model names its topic
and value, and the node puts it under ``("users", USER, "memories")`` with the topic as key, so a new
fact on the same topic supersedes the old one (P-Mem keeps it in the item's history). A question goes to
``answer``: the node searches the user's memories (hybrid search) and the model answers from them.
The model is ``--model`` at ``--api-base`` (default: ``$PMEM_LLM_MODEL`` at ``$PMEM_LLM_BASE``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent))  # recorded.py beside this file
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm's price list from the package, not the web

import litellm  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.store.base import BaseStore  # noqa: E402
from langgraph.types import RunnableConfig  # noqa: E402

import pmem  # noqa: E402
from pmem.integrations.langgraph import PMemStore  # noqa: E402

FACT = {"type": "object", "properties": {"topic": {"type": "string"}, "value": {"type": "string"}},
        "required": ["topic", "value"]}
REMEMBER = ("Extract the fact the user states about themselves as JSON: the thing it is about, in two or three "
            'words, and its value. For "My home city is Lisbon." answer {"topic": "home city", "value": "Lisbon"}.')
ANSWER = "Answer the user's question in one short sentence, using only these memories:\n"


class Turn(TypedDict):
    message: str
    reply: str


def ask(config: RunnableConfig, system: str, user: str, schema: dict[str, Any] | None = None) -> str:
    """One model call at temperature 0 (the settings ride in the graph's config)."""
    c = config["configurable"]
    extra = {"response_format": {"type": "json_schema", "json_schema": {"name": "fact", "schema": schema}}} \
        if schema else {}
    response = litellm.completion(model=c["model"], api_base=c["api_base"], api_key=os.environ.get("PMEM_LLM_KEY",
                                  "none"), messages=[{"role": "system", "content": system},
                                                     {"role": "user", "content": user}],
                                  temperature=0, max_tokens=80, **extra)
    return str(response.choices[0].message.content or "").strip()


def remember(state: Turn, config: RunnableConfig, *, store: BaseStore) -> dict[str, str]:
    try:
        fact = json.loads(ask(config, REMEMBER, state["message"], FACT))
        topic, said = str(fact["topic"]).strip().lower(), str(fact["value"]).strip()
    except (ValueError, KeyError, TypeError):
        return {"reply": "(nothing to remember)"}
    if not topic or not said:
        return {"reply": "(nothing to remember)"}
    store.put(("users", config["configurable"]["user"], "memories"), topic, {"topic": topic, "value": said})
    return {"reply": f"remembered {topic}: {said}"}


def answer(state: Turn, config: RunnableConfig, *, store: BaseStore) -> dict[str, str]:
    found = store.search(("users", config["configurable"]["user"], "memories"), query=state["message"], limit=3)
    memories = "\n".join(f"- {i.value['topic']}: {i.value['value']}" for i in found) or "- (none)"
    return {"reply": ask(config, ANSWER + memories, state["message"])}


def route(state: Turn) -> str:
    return "answer" if state["message"].rstrip().endswith("?") else "remember"


def build(store: BaseStore) -> Any:
    graph = StateGraph(Turn)
    graph.add_node("remember", remember)
    graph.add_node("answer", answer)
    graph.add_conditional_edges(START, route, ["remember", "answer"])
    graph.add_edge("remember", END)
    graph.add_edge("answer", END)
    return graph.compile(store=store)


def main(argv: list[str] | None = None) -> list[str]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("messages", nargs="+")
    p.add_argument("--db", default=os.environ.get("PMEM_DB", "pmem.db"))
    p.add_argument("--user", default="alice")
    p.add_argument("--model", default=os.environ.get("PMEM_LLM_MODEL", "openai/qwen"))
    p.add_argument("--api-base", default=os.environ.get("PMEM_LLM_BASE"))
    p.add_argument("--record", type=Path, help="write the model's answers to this JSON file (for a replay)")
    a = p.parse_args(argv)
    if a.record:
        from recorded import record

        record(a.record)
    replies = []
    with pmem.open(a.db) as store:
        graph = build(PMemStore(store))
        config: RunnableConfig = {"configurable": {"user": a.user, "model": a.model, "api_base": a.api_base}}
        for message in a.messages:
            replies.append(graph.invoke({"message": message, "reply": ""}, config)["reply"])
            print(f"> {message}\n{replies[-1]}", flush=True)
        memories = PMemStore(store)
        ns = ("users", a.user, "memories")
        for item in memories.search(ns, limit=50):  # what is held now, and what each item displaced
            versions = memories.history(ns, item.key).versions
            print(f"memory {item.key!r}: {item.value['value']} ({len(versions)} version(s): "
                  f"{' -> '.join(json.loads(v.value or '{}').get('value', {}).get('value', '?') for v in versions)})")
    return replies


if __name__ == "__main__":
    main()
