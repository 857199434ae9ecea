"""A real, tiny OpenAI-compatible chat server for tests: ``POST /v1/chat/completions`` on 127.0.0.1.

Each request is answered with the text ``reply(request)`` returns (the request as the client sent it:
``messages``, ``response_format``, ``max_tokens`` ...), so a test scripts what "the model" says while
litellm, its HTTP client and the JSON on the wire are the real ones. ``requests`` records every request.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = Callable[[dict[str, Any]], str]


class ChatServer:
    """Serves until :meth:`close`; ``base`` is the ``/v1`` URL to give litellm as ``api_base``."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.requests: list[dict[str, Any]] = []
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def answer(self, request: dict[str, Any]) -> bytes:
        """The completion body for ``request``: one choice holding the scripted text."""
        self.requests.append(request)
        text = self.reply(request)
        return json.dumps({
            "id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": 0,
            "model": request.get("model", "test"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server naming
                length = int(self.headers.get("Content-Length") or 0)
                request: Any = json.loads(self.rfile.read(length) or b"{}")
                if self.path.rstrip("/") != "/v1/chat/completions":
                    status, body = 404, b'{"error": {"message": "not found"}}'
                else:
                    status, body = 200, server.answer(request)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet in tests
                pass

        return Handler


@contextmanager
def chat_server(reply: Reply) -> Iterator[ChatServer]:
    server = ChatServer(reply)
    try:
        yield server
    finally:
        server.close()
