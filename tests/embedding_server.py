"""A real, tiny OpenAI-compatible embedding server for tests: ``POST /v1/embeddings`` on 127.0.0.1.

Vectors are deterministic: the hashing embedder's vector of each text, scaled by ``1 + len(text) % 3``
(so the client's own normalisation is exercised). ``mode`` makes it misbehave on purpose:

    ok          a well-formed answer
    bad-json    status 200 with a body that is not JSON
    wrong-dim   the first request answers in ``dim`` dimensions, every later one in ``dim + 1``
    short       one vector fewer than texts
    error       status 500 with an OpenAI-style error object

``requests`` records each request's input list, so tests can see batching and caching.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pmem.adapters.embedders.hashing_embedder import HashingEmbedder
from tests.local_server import LocalServer


class EmbeddingServer(LocalServer):
    """Serves until :meth:`close`; ``base`` is the ``/v1`` URL to give litellm as ``api_base``."""

    route = "/v1/embeddings"

    def __init__(self, dim: int = 32, mode: str = "ok") -> None:
        self.dim = dim
        self.mode = mode
        self.requests: list[list[str]] = []
        super().__init__()

    def respond(self, request: Any) -> tuple[int, bytes]:
        texts = request.get("input")
        return self.answer([texts] if isinstance(texts, str) else list(texts))

    def answer(self, texts: list[str]) -> tuple[int, bytes]:
        """The status and body this server gives for ``texts``."""
        self.requests.append(texts)
        if self.mode == "bad-json":
            return 200, b'{"object": "list", "data": [{"embedding": [0.1, 0.2'
        if self.mode == "error":
            return 500, json.dumps({"error": {"message": "model exploded", "type": "server_error"}}).encode()
        dim = self.dim + (1 if self.mode == "wrong-dim" and len(self.requests) > 1 else 0)
        vectors = HashingEmbedder(dim).embed(texts)
        data = [{"object": "embedding", "index": i, "embedding": [float(x) * (1 + len(t) % 3) for x in v]}
                for i, (t, v) in enumerate(zip(texts, vectors, strict=True))]
        if self.mode == "short":
            data = data[:-1]
        body = {"object": "list", "data": data, "model": "test-embed",
                "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)}}
        return 200, json.dumps(body).encode()


@contextmanager
def embedding_server(dim: int = 32, mode: str = "ok") -> Iterator[EmbeddingServer]:
    server = EmbeddingServer(dim, mode)
    try:
        yield server
    finally:
        server.close()


def closed_port_base() -> str:
    """A ``/v1`` URL on a 127.0.0.1 port nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"
