"""A model's answers, recorded on a real run (``--record FILE``) and replayed in CI without a model.

``record(path)`` wraps ``litellm.completion`` (every model call of an example, P-Mem's LLM extractor's
included, goes through it) and writes each request's last message and the answer to ``path`` as JSON.
``replay(path)`` is a stand-in for ``litellm.completion`` that gives those answers back in order, and
fails when a request is not the one recorded, so a changed prompt cannot pass on a stale recording.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
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


def replay(path: Path) -> Callable[..., Any]:
    """A ``litellm.completion`` that answers from the recording at ``path``, in order."""
    calls = json.loads(path.read_text())

    def completion(**kwargs: Any) -> Any:
        assert calls, f"the example asked the model more often than {path.name} recorded"
        call = calls.pop(0)
        assert asked(kwargs) == call["asked"], f"request differs from {path.name}: {asked(kwargs)[:200]!r}"
        message = SimpleNamespace(content=call["answer"], tool_calls=None, role="assistant")
        return SimpleNamespace(choices=[SimpleNamespace(message=message, finish_reason="stop")])

    completion.left = calls  # type: ignore[attr-defined]
    return completion
