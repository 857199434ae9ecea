"""One HTTP request and its answer as frames over a local stream, and an ASGI app answering them: how a
server process hands a request to its heavy process (:mod:`.heavy_process`) with no HTTP in between.

Why not HTTP over the Unix socket: the server process forwards every search, read and ``next``, and
with an HTTP client (httpx) that forwarding ran enough Python on its event loop to put the ``get`` p99
back where it was with the heavy reads in the process itself (docs/decisions.md, "Heavy reads apart").
A frame is the request's or answer's head (method, path, query and headers; or status and headers) as
orjson, then its body, each after its length as 4 bytes, big-endian: two writes and two reads a request.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import orjson

LENGTH = struct.Struct(">I")
Head = dict[str, Any]


def frame(head: Head, body: bytes) -> bytes:
    encoded = orjson.dumps(head)
    return b"".join((LENGTH.pack(len(encoded)), encoded, LENGTH.pack(len(body)), body))


async def read_frame(reader: asyncio.StreamReader) -> tuple[Head, bytes]:
    """A head and a body (``asyncio.IncompleteReadError`` at the end of the stream)."""
    head = orjson.loads(await reader.readexactly(LENGTH.unpack(await reader.readexactly(4))[0]))
    return head, await reader.readexactly(LENGTH.unpack(await reader.readexactly(4))[0])


def request_head(scope: dict[str, Any]) -> Head:
    """What of an HTTP request's ASGI scope travels: method, path, query and the headers (as latin-1)."""
    return {"method": scope["method"], "path": scope["path"],
            "raw_path": (scope.get("raw_path") or scope["path"].encode()).decode("latin-1"),
            "query": scope.get("query_string", b"").decode("latin-1"),
            "headers": [[k.decode("latin-1"), v.decode("latin-1")] for k, v in scope["headers"]]}


async def call(app: Any, head: Head, body: bytes) -> tuple[Head, bytes]:
    """``app``'s answer to one request: its status and headers, and its body."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "scheme": "http",
             "method": head["method"], "path": head["path"], "raw_path": head["raw_path"].encode("latin-1"),
             "query_string": head["query"].encode("latin-1"), "root_path": "", "client": None, "server": None,
             "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in head["headers"]]}
    answered = asyncio.Event()
    sent = [False]
    start: Head = {"status": 500, "headers": []}
    parts: list[bytes] = []

    async def receive() -> dict[str, Any]:
        if not sent[0]:
            sent[0] = True
            return {"type": "http.request", "body": body, "more_body": False}
        await answered.wait()  # what waits for the client to go: it goes once the answer is whole
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            start.update(status=message["status"], headers=[[k.decode("latin-1"), v.decode("latin-1")]
                                                            for k, v in message.get("headers", [])])
        elif message["type"] == "http.response.body":
            parts.append(message.get("body", b""))
            if not message.get("more_body", False):
                answered.set()

    try:
        await app(scope, receive, send)
    finally:
        answered.set()
    return start, b"".join(parts)


async def answer_frames(app: Any, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answer the requests of one connection, one after another, until the other end closes it."""
    try:
        while True:
            head, body = await read_frame(reader)
            writer.write(frame(*await call(app, head, body)))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()
