"""The HTTP plumbing of the tests' OpenAI-compatible servers (tests/embedding_server.py, tests/chat_server.py):
one JSON ``POST`` route on 127.0.0.1, served on a thread until :meth:`LocalServer.close`."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class LocalServer:
    """Answers ``POST`` to :attr:`route` with :meth:`respond`; ``base`` is the ``/v1`` URL for ``api_base``."""

    route = "/v1"

    def __init__(self) -> None:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def respond(self, request: Any) -> tuple[int, bytes]:
        """The status and JSON body for a decoded request body."""
        raise NotImplementedError

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server naming
                length = int(self.headers.get("Content-Length") or 0)
                request: Any = json.loads(self.rfile.read(length) or b"{}")
                if self.path.rstrip("/") != server.route:
                    status, body = 404, b'{"error": {"message": "not found"}}'
                else:
                    status, body = server.respond(request)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet in tests
                pass

        return Handler
