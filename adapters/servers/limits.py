"""The bounds on one request's work, shared by ``pmem serve`` and ``pmem mcp`` (docs/server.md, "Limits").

:class:`Limits` holds them (each a CLI option of both commands); :class:`LimitExceeded` is what a request
over one gets (413 for a body or batch too large, 422 for the rest, naming the limit, its value and its
option); :class:`Deadline` is one request's time, and :class:`DeadlinePassed` what it gets past it (503
with ``Retry-After``). :class:`BodyLimit` refuses an HTTP body over the limit before anything parses it.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from typing import Any

from pmem.domain.errors import DeadlinePassed as DeadlinePassed
from pmem.domain.errors import InvalidOperation
from pmem.domain.errors import LimitExceeded as LimitExceeded

ENV_LIMITS = "PMEM_SERVE_LIMITS"  # the limits, as JSON, for the worker processes of a --workers N server
RETRY_AFTER_S = 1


@dataclass(frozen=True)
class Limits:
    """The most one request may ask for; ``deadline_s``: its time; ``connections``: requests served at
    once per process, each on its own store and database connection; ``heavy``: of those, the heavy reads
    (search, read, ``next``...: :class:`~.store_pool.StorePool`)."""

    body_bytes: int = 4 * 1024 * 1024
    batch: int = 100
    k: int = 100
    limit: int = 1000
    question_chars: int = 4000
    deadline_s: float = 10.0
    connections: int = 4
    heavy: int = 1

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls, text: str | None) -> Limits:
        return cls(**json.loads(text)) if text else cls()

    def batch_of(self, items: list[Any], what: str) -> None:
        if len(items) > self.batch:
            raise LimitExceeded(f"batch too large: {len(items)} {what}, the limit is {self.batch} (--max-batch)",
                                413, "batch")

    def k_of(self, k: int) -> int:
        if k > self.k:
            raise LimitExceeded(f"k={k} is over the limit of {self.k} (--max-k)", 422, "k")
        return k

    def limit_of(self, limit: int | None) -> int | None:
        if limit is not None and limit > self.limit:
            raise LimitExceeded(f"limit={limit} is over the limit of {self.limit} (--max-limit)", 422, "limit")
        return limit

    def question_of(self, text: str, field: str = "question") -> str:
        if len(text) > self.question_chars:
            raise LimitExceeded(f"{field} too long: {len(text)} characters, the limit is {self.question_chars} "
                                "(--max-question)", 422, field)
        return text


class Deadline:
    """One request's deadline, ``seconds`` from now."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def left(self) -> float:
        return max(0.0, self.at - time.monotonic())

    def check(self, what: str) -> None:
        if time.monotonic() >= self.at:
            raise DeadlinePassed(f"{what}: the request ran past the deadline of {self.seconds:g} s (--deadline)")


def add_options(p: argparse.ArgumentParser) -> None:
    """The limit options, as ``pmem serve`` and ``pmem mcp`` take them (defaults: :class:`Limits`)."""
    d = Limits()
    p.add_argument("--max-body", dest="max_body", type=int, metavar="BYTES", default=d.body_bytes,
                   help=f"the largest request body, in bytes (default {d.body_bytes}; over it: 413)")
    p.add_argument("--max-batch", dest="max_batch", type=int, metavar="N", default=d.batch,
                   help=f"the most operations or records in one write (default {d.batch}; over it: 413)")
    p.add_argument("--max-k", dest="max_k", type=int, metavar="N", default=d.k,
                   help=f"the largest k of search, read and next (default {d.k}; over it: 422)")
    p.add_argument("--max-limit", dest="max_limit", type=int, metavar="N", default=d.limit,
                   help=f"the largest page of frontier and log (default {d.limit}; over it: 422)")
    p.add_argument("--max-question", dest="max_question", type=int, metavar="CHARS", default=d.question_chars,
                   help=f"the longest question or query, in characters (default {d.question_chars}; over it: 422)")
    p.add_argument("--deadline", type=float, metavar="SECONDS", default=d.deadline_s,
                   help=f"seconds a request may run (default {d.deadline_s:g}; past it: 503 with Retry-After, "
                        "and a write is not committed)")
    p.add_argument("--connections", type=int, metavar="N", default=d.connections,
                   help=f"requests served at once, each on its own database connection (default {d.connections})")
    p.add_argument("--heavy", type=int, metavar="N", default=d.heavy,
                   help=f"of those, the heavy reads (search, read, next...) served at once (default {d.heavy})")


def from_options(args: Any) -> Limits:
    """The limits the options give; a bad one is a one-line error naming its option."""
    limits = Limits(body_bytes=args.max_body, batch=args.max_batch, k=args.max_k, limit=args.max_limit,
                    question_chars=args.max_question, deadline_s=args.deadline, connections=args.connections,
                    heavy=args.heavy)
    for option, value in (("--max-body", limits.body_bytes), ("--max-batch", limits.batch), ("--max-k", limits.k),
                          ("--max-limit", limits.limit), ("--max-question", limits.question_chars),
                          ("--connections", limits.connections), ("--heavy", limits.heavy)):
        if value < 1:
            raise InvalidOperation(f"{option} must be at least 1, got {value}", field=option)
    if not 0 < limits.deadline_s < 86_400:
        raise InvalidOperation(f"--deadline must be seconds from 0 to 86400, got {limits.deadline_s:g}",
                               field="--deadline")
    return limits


class BodyLimit:
    """ASGI: a request body over ``limit`` bytes is answered 413 before the app reads it (by its
    ``Content-Length``, or as it streams in); the body read so far is handed on to the app unchanged."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        length = next((v for k, v in scope["headers"] if k == b"content-length"), None)
        if length is not None and length.isdigit() and int(length) > self.limit:
            await self._refuse(send, int(length))
            return
        messages, size = [], 0
        while True:
            message = await receive()
            messages.append(message)
            size += len(message.get("body", b""))
            if size > self.limit:
                await self._refuse(send, size)
                return
            if message["type"] != "http.request" or not message.get("more_body", False):
                break

        async def replay() -> Any:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send: Any, size: int) -> None:
        detail = f"request body too large: {size} bytes, the limit is {self.limit} (--max-body)"
        body = json.dumps({"error": LimitExceeded.kind, "detail": detail}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})
