"""A language model through litellm, asked for JSON and read deterministically, with bounded retries.

litellm is slow to import, so it is imported on the first call, never at module import. Any
litellm model string works (``openai/<alias>`` with ``api_base`` for a local OpenAI-compatible server,
``ollama/...``, a hosted model). Tests point ``api_base`` at a tiny OpenAI-compatible server on 127.0.0.1
(tests/chat_server.py), so every path, malformed answers and failed calls included, runs through the real
litellm and real HTTP.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pmem.domain.errors import ExtractorNotConfigured, MissingExtra

T = TypeVar("T")
Parse = Callable[[str], tuple[T | None, str]]
"""Reads one answer: the value, or ``None`` and the reason the answer is unusable."""


@dataclass
class LlmSettings:
    """Which model to ask and how: the composition root builds one from the CLI or the environment."""

    model: str
    api_base: str | None = None
    api_key: str | None = None
    attempts: int = 3  # the first call plus at most two retries
    timeout_s: float = 60.0
    temperature: float = 0.0
    max_tokens: int | None = None  # a bound on each answer's length; None: the server's own

    def __post_init__(self) -> None:
        if not self.model or not self.model.strip():
            raise ExtractorNotConfigured("no model configured (give --model, e.g. openai/qwen --api-base URL)")
        if self.api_base and "/" not in self.model:  # a bare alias on an OpenAI-compatible server
            self.model = f"openai/{self.model.strip()}"
        if self.attempts < 1:
            raise ExtractorNotConfigured(f"attempts must be at least 1, got {self.attempts}")


@dataclass(frozen=True)
class Answer:
    """What a bounded conversation with the model gave: a value, or why there is none."""

    value: Any
    reason: str | None
    attempts: int


def _litellm() -> Any:
    """litellm, imported on first use, told not to fetch its model price map from the network; without
    the ``llm`` extra, :class:`MissingExtra` naming it."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm  # lazily: slow to import, and only in the `llm` extra
    except ModuleNotFoundError as e:
        if e.name != "litellm":
            raise  # litellm is there but broken: the real cause, not a misleading hint
        raise MissingExtra("litellm", "llm") from None

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    return litellm


def _require_litellm() -> None:
    """:class:`MissingExtra` naming the ``llm`` extra when litellm is not installed; finds it without importing it."""
    if importlib.util.find_spec("litellm") is None:
        raise MissingExtra("litellm", "llm")


class JsonModel:
    """Asks for JSON under a schema; feeds back why an answer was unusable and asks again, boundedly."""

    def __init__(self, settings: LlmSettings) -> None:
        _require_litellm()  # at setup (before a store is opened), not at the first call
        self.settings = settings
        self.calls = 0  # model invocations, read by tests and the benchmark

    def ask(self, system: str, user: str, schema: dict[str, Any], name: str, parse: Parse[Any],
            max_tokens: int | None = None) -> Answer:
        """Up to ``settings.attempts`` calls; the first usable answer, else the last reason. ``max_tokens``
        bounds each answer (default ``settings.max_tokens``): a small model can loop until its context is full,
        and a server keeps generating after the client has timed out."""
        messages: list[dict[str, str]] = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        reason = "no answer"
        for attempt in range(self.settings.attempts):
            text, failure = self._call(messages, schema, name, max_tokens or self.settings.max_tokens)
            if failure is not None:
                reason = failure
                continue
            value, why = parse(text)
            if value is not None:
                return Answer(value, None, attempt + 1)
            reason = why
            messages += [{"role": "assistant", "content": text[:4000]},
                         {"role": "user", "content": f"That answer was unusable ({why}). Answer again with only "
                                                     "one JSON object that follows the schema."}]
        return Answer(None, f"llm output unusable after {self.settings.attempts} attempts: {reason}",
                      self.settings.attempts)

    def _call(self, messages: list[dict[str, str]], schema: dict[str, Any], name: str,
              max_tokens: int | None) -> tuple[str, str | None]:
        """One completion: its text, or the reason the call itself failed (never raises)."""
        litellm = _litellm()
        s = self.settings
        kwargs: dict[str, Any] = {
            "model": s.model, "messages": messages, "temperature": s.temperature, "timeout": s.timeout_s,
            "max_retries": 0,  # our own attempts are the bound; the client must not multiply them
            "response_format": {"type": "json_schema", "json_schema": {"name": name, "schema": schema}},
        }
        if max_tokens:
            kwargs["max_tokens"] = max_tokens
        if s.api_base:
            kwargs["api_base"] = s.api_base
            kwargs["api_key"] = s.api_key or "none"
        elif s.api_key:
            kwargs["api_key"] = s.api_key
        self.calls += 1
        try:
            response = litellm.completion(**kwargs)
            content = response.choices[0].message.content
        except Exception as e:  # noqa: BLE001 - any failure of the call becomes a recorded reason
            return "", f"model call failed: {type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
        if not isinstance(content, str):
            return "", "the model returned no text"
        return content, None
