"""A real, tiny OpenAI-compatible chat server for tests: ``POST /v1/chat/completions`` on 127.0.0.1.

Each request is answered with the text ``reply(request)`` returns (the request as the client sent it:
``messages``, ``response_format``, ``max_tokens`` ...), so a test scripts what "the model" says while
litellm, its HTTP client and the JSON on the wire are the real ones. ``requests`` records every request.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tests.local_server import LocalServer

Reply = Callable[[dict[str, Any]], str]


class ChatServer(LocalServer):
    """Serves until :meth:`close`; ``base`` is the ``/v1`` URL to give litellm as ``api_base``."""

    route = "/v1/chat/completions"

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.requests: list[dict[str, Any]] = []
        super().__init__()

    def respond(self, request: Any) -> tuple[int, bytes]:
        """One choice holding the scripted text."""
        self.requests.append(request)
        text = self.reply(request)
        return 200, json.dumps({
            "id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": 0,
            "model": request.get("model", "test"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()


@contextmanager
def chat_server(reply: Reply) -> Iterator[ChatServer]:
    server = ChatServer(reply)
    try:
        yield server
    finally:
        server.close()
