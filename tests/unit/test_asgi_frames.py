"""The frames a server hands a heavy request to its child with: a request's head and body arrive whole,
and an ASGI app's answer, sent in parts, comes back whole with its status and headers."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from pmem.adapters.servers.asgi_frames import call, frame, read_frame, request_head


async def echo(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answers with what it was sent, in two parts, then looks for the client going away."""
    message = await receive()
    headers = [[k.decode("latin-1"), v.decode("latin-1")] for k, v in scope["headers"]]
    seen = {"method": scope["method"], "path": scope["path"], "raw_path": scope["raw_path"].decode(),
            "query": scope["query_string"].decode(), "headers": headers, "body": message["body"].decode()}
    body = orjson.dumps(seen)
    await send({"type": "http.response.start", "status": 207, "headers": [(b"content-type", b"application/json"),
                                                                          (b"x-two", b"1"), (b"x-two", b"2")]})
    await send({"type": "http.response.body", "body": body[:5], "more_body": True})
    await send({"type": "http.response.body", "body": body[5:]})
    assert (await receive())["type"] == "http.disconnect"


def test_a_request_goes_through_frames_and_its_answer_comes_back_whole() -> None:
    scope = {"type": "http", "method": "POST", "path": "/v1/read", "raw_path": b"/v1/read",
             "query_string": b"namespace=t%C3%A9am", "headers": [(b"authorization", b"Bearer tok\xe9")]}
    body = "where is Ann? é".encode()

    async def run() -> tuple[dict[str, Any], bytes]:
        reader = asyncio.StreamReader()
        reader.feed_data(frame(request_head(scope), body))
        reader.feed_eof()
        head, got = await read_frame(reader)
        answer_reader = asyncio.StreamReader()
        answer_reader.feed_data(frame(*await call(echo, head, got)))
        answer_reader.feed_eof()
        return await read_frame(answer_reader)

    head, answer = asyncio.run(run())
    assert head["status"] == 207
    assert head["headers"] == [["content-type", "application/json"], ["x-two", "1"], ["x-two", "2"]]
    assert orjson.loads(answer) == {"method": "POST", "path": "/v1/read", "raw_path": "/v1/read",
                                    "query": "namespace=t%C3%A9am",
                                    "headers": [["authorization", "Bearer tok\u00e9"]], "body": "where is Ann? é"}


def test_a_stream_that_ends_mid_frame_is_an_incomplete_read() -> None:
    async def run() -> None:
        reader = asyncio.StreamReader()
        reader.feed_data(frame({"status": 200, "headers": []}, b"abc")[:-1])
        reader.feed_eof()
        await read_frame(reader)

    with pytest.raises(asyncio.IncompleteReadError):
        asyncio.run(run())
