"""The semantic conflict judge backed by an LLM, used only when one is configured.

Set ``PMEM_LLM_BASE`` (an OpenAI-compatible server, e.g. ``http://127.0.0.1:8080/v1``) and optionally
``PMEM_LLM_MODEL`` (default ``local``); otherwise :func:`judge_from_env` gives ``None`` and the
conflict check uses its rule. litellm is imported only when the judge is first asked. A server that
fails or answers out of form raises :class:`~domain.errors.JudgeUnavailable`: never a silent pass.
"""

from __future__ import annotations

import json
import os
from typing import Any

from pmem.domain.errors import JudgeUnavailable

PROMPT = ("Two facts from one memory. Answer with JSON only: {{\"conflict\": true|false, \"reason\": "
          "\"one short sentence\"}}. They conflict when both cannot be true at the same time.\n"
          "Fact A: {a_key} = {a_value}\nFact B: {b_key} = {b_value}")


def parse_verdict(text: str) -> tuple[bool, str]:
    """``{"conflict": bool, "reason": str}`` (code fences allowed) -> ``(conflict, reason)``."""
    body = text.strip().removeprefix("```json").removeprefix("```").removesuffix("```").strip()
    try:
        d = json.loads(body)
    except ValueError as e:
        raise JudgeUnavailable(f"conflict judge answered without JSON: {text[:80]!r}") from e
    if not isinstance(d, dict) or not isinstance(d.get("conflict"), bool):
        raise JudgeUnavailable(f"conflict judge answered without a boolean 'conflict': {text[:80]!r}")
    return d["conflict"], str(d.get("reason") or "judged conflicting by the LLM")


class LlmJudge:
    """Asks the model whether two facts conflict (temperature 0, JSON answer)."""

    def __init__(self, api_base: str, model: str = "local") -> None:
        self.api_base = api_base
        self.model = model

    def judge(self, key: str, value: str, other_key: str, other_value: str) -> tuple[bool, str]:
        from pmem.adapters.llm.client import _litellm

        litellm = _litellm()  # the `llm` extra, named in a one-line error when it is missing

        prompt = PROMPT.format(a_key=key, a_value=value, b_key=other_key, b_value=other_value)
        try:
            r: Any = litellm.completion(model=f"openai/{self.model}", api_base=self.api_base, api_key="x",
                                        temperature=0, messages=[{"role": "user", "content": prompt}])
        except Exception as e:  # litellm raises many kinds; the caller sees one
            raise JudgeUnavailable(f"conflict judge at {self.api_base} failed: {e}") from e
        return parse_verdict(r.choices[0].message.content or "")


def judge_from_env() -> LlmJudge | None:
    base = os.environ.get("PMEM_LLM_BASE")
    return None if not base else LlmJudge(base, os.environ.get("PMEM_LLM_MODEL", "local"))
