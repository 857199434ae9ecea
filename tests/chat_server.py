"""A real, tiny OpenAI-compatible chat server for tests: ``POST /v1/chat/completions`` on 127.0.0.1.

Each request is answered with what ``reply(request)`` returns (the request as the client sent it:
``messages``, ``response_format``, ``tools``, ``max_tokens`` ...), so a test scripts what "the model" says
while litellm, its HTTP client and the JSON on the wire are the real ones. ``requests`` records every request.

A reply is one of:

- a string: the assistant's text (``finish_reason`` "stop");
- a dict: the assistant message itself, e.g. ``{"tool_calls": [{"id": "call_1", "type": "function",
  "function": {"name": "read", "arguments": "{...}"}}]}`` (OpenAI's wire format: ``arguments`` is a JSON
  string; ``content`` defaults to null; ``finish_reason`` is "tool_calls" when it has any);
- a :class:`Failure`: an HTTP error with an OpenAI-style error object (429: the client raises its
  ``RateLimitError``), for a call that fails rather than answers.

:class:`Script` is a ready-made ``reply``: scripted answers per model name, in turn.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tests.local_server import LocalServer


@dataclass(frozen=True)
class Failure:
    """An HTTP error the server answers instead of a completion."""

    status: int
    message: str


Answer = str | dict[str, Any] | Failure
Reply = Callable[[dict[str, Any]], Answer]


class ChatServer(LocalServer):
    """Serves until :meth:`close`; ``base`` is the ``/v1`` URL to give litellm as ``api_base``."""

    route = "/v1/chat/completions"

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.requests: list[dict[str, Any]] = []
        super().__init__()

    def respond(self, request: Any) -> tuple[int, bytes]:
        """One choice holding the scripted message, or the scripted error."""
        self.requests.append(request)
        answer = self.reply(request)
        if isinstance(answer, Failure):
            return answer.status, json.dumps({"error": {"message": answer.message, "type": "test_failure",
                                                        "code": answer.status}}).encode()
        message = {"role": "assistant", "content": None, **answer} if isinstance(answer, dict) else {
            "role": "assistant", "content": answer}
        return 200, json.dumps({
            "id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": 0,
            "model": request.get("model", "test"),
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()


class Script:
    """A ``reply`` from scripted answers per model name (as the request names it: ``openai/m-1`` arrives as
    ``m-1``): each name's answers in turn, the last one again for every later request (a retry asks again).
    A model with no script gets a 404, so a call nobody expected fails visibly."""

    def __init__(self) -> None:
        self.answers: dict[str, list[Answer]] = {}

    def add(self, model: str, *answers: Answer) -> str:
        """Script ``model``'s answers; returns the name."""
        assert answers and model not in self.answers, model
        self.answers[model] = list(answers)
        return model

    def __call__(self, request: dict[str, Any]) -> Answer:
        queue = self.answers.get(request.get("model", ""))
        if not queue:
            return Failure(404, f"no script for model {request.get('model')!r}")
        return queue.pop(0) if len(queue) > 1 else queue[0]


@contextmanager
def chat_server(reply: Reply) -> Iterator[ChatServer]:
    server = ChatServer(reply)
    try:
        yield server
    finally:
        server.close()
