"""Mem0's quickstart loop on P-Mem's Mem0-shaped door (docs/integrations.md#mem0).

    python docs/examples/mem0_chat.py --db mem.db --user alice [--extractor llm] \\
        "My 5K PB is now 27:12." "My 5K PB is now 25:50." "What is my 5K PB?"

Code written for Mem0 changes only its import and its config: ``Memory.from_config({"db": ...})``. A
statement is added with ``memory.add`` (P-Mem's extractor: the offline template one, or with
``--extractor llm`` the model), so a new value supersedes the old one instead of piling up; a question is
answered by the model from ``memory.search``. At the end the script prints each memory's history: the
values it displaced are kept. The model is ``--model`` at ``--api-base`` (default: ``$PMEM_LLM_MODEL`` at
``$PMEM_LLM_BASE``).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # recorded.py beside this file
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm's price list from the package, not the web

import litellm  # noqa: E402

from pmem.integrations.mem0 import Memory  # noqa: E402

SYSTEM = "Answer the user's question in one short sentence, using only these memories:\n"


def chat(memory: Memory, message: str, user: str, model: str, api_base: str | None, timeout: float) -> str:
    """Mem0's loop: a statement is remembered; a question is answered from the memories it finds."""
    if not message.rstrip().endswith("?"):
        added = memory.add([{"role": "user", "content": message}], user_id=user)["results"]
        return "; ".join(f"{r['event']} {r['memory']}" for r in added) or "(nothing to remember)"
    found = memory.search(message, user_id=user, limit=3)["results"]
    memories = "\n".join(f"- {m['memory']}" for m in found) or "- (none)"
    response = litellm.completion(model=model, api_base=api_base, api_key=os.environ.get("PMEM_LLM_KEY", "none"),
                                  messages=[{"role": "system", "content": SYSTEM + memories},
                                            {"role": "user", "content": message}], temperature=0, max_tokens=80,
                                  timeout=timeout)
    return str(response.choices[0].message.content or "").strip()


def main(argv: list[str] | None = None) -> list[str]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("messages", nargs="+")
    p.add_argument("--db", default=os.environ.get("PMEM_DB", "pmem.db"))
    p.add_argument("--user", default="alice")
    p.add_argument("--extractor", choices=("template", "llm"), default="template")
    p.add_argument("--model", default=os.environ.get("PMEM_LLM_MODEL", "openai/qwen"))
    p.add_argument("--api-base", default=os.environ.get("PMEM_LLM_BASE"))
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for each model answer")
    p.add_argument("--record", type=Path, help="write the model's answers to this JSON file (for a replay)")
    a = p.parse_args(argv)
    if a.record:
        from recorded import record

        record(a.record)
    config = {"db": a.db, "extractor": a.extractor,
              "llm": {"model": a.model, "api_base": a.api_base, "timeout_s": a.timeout}}
    replies = []
    with Memory.from_config(config) as memory:
        for message in a.messages:
            replies.append(chat(memory, message, a.user, a.model, a.api_base, a.timeout))
            print(f"> {message}\n{replies[-1]}", flush=True)
        for m in memory.get_all(user_id=a.user)["results"]:
            chain = " -> ".join(h["new_memory"] for h in memory.history(m["id"]))
            print(f"memory {m['id']}: {m['memory']} (versions: {chain})", flush=True)
    return replies


if __name__ == "__main__":
    main()
