"""A model's answers, recorded on a real run (``--record FILE``) and replayed in CI without a model.

``record(path)`` wraps ``litellm.completion`` (every model call of an example, P-Mem's LLM extractor's
included, goes through it) and writes each request's last message and the answer to ``path`` as JSON.
``Replay(path)`` gives those answers back in order, as a test's OpenAI-compatible server answers litellm's
real requests, and refuses a request that is not the one recorded, so a changed prompt cannot pass on a
stale recording.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm's price list from the package, not the web


def asked(kwargs: dict[str, Any]) -> str:
    """What a request asks: its last message's text."""
    return str(kwargs["messages"][-1]["content"])


def record(path: Path) -> None:
    """From now on, append every completion's question and answer to ``path``."""
    import litellm

    real = litellm.completion
    calls: list[dict[str, str]] = []

    def recording(**kwargs: Any) -> Any:
        response = real(**kwargs)
        calls.append({"asked": asked(kwargs), "answer": response.choices[0].message.content or ""})
        path.write_text(json.dumps(calls, indent=1, ensure_ascii=False) + "\n")
        return response

    litellm.completion = recording


class Replay:
    """The recording at ``path`` as a chat server's answers (one request's JSON body in, the answer's text
    out), in order: a request that is not the one recorded, or one too many, gets ``None`` and is noted
    in ``wrong``; ``left`` is what was not asked."""

    def __init__(self, path: Path) -> None:
        self.name = path.name
        self.left: list[dict[str, str]] = json.loads(path.read_text())
        self.wrong: list[str] = []

    def __call__(self, request: dict[str, Any]) -> str | None:
        question = asked(request)
        if not self.left:
            self.wrong.append(f"asked more often than {self.name} recorded: {question[:200]!r}")
            return None
        call = self.left.pop(0)
        if question != call["asked"]:
            self.wrong.append(f"request differs from {self.name}: {question[:200]!r}")
            return None
        return call["answer"]
