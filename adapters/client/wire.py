"""What travels between a remote store and ``pmem serve``, without any I/O: the :class:`Request` a call
sends, the domain types its JSON answer decodes into, and the error an error answer becomes.

Answers decode into the types the local store returns (``Receipt``, ``CellView``, ``History``,
``SearchResult``, ``ReadResult``); an answer that does not fit is a :class:`StoreError` naming what was
expected. Error answers (``{"error", "detail", "field"?, "line"?}``, docs/server.md) become the same error
classes the server raised, so a caller catches the same ones as with the local store.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, TypeVar

import msgspec

from pmem.domain import errors as e
from pmem.domain.views import CellView, Head, History, Receipt
from pmem.projections.reading import ReadResult
from pmem.projections.vectors import SearchResult

T = TypeVar("T")

# The errors a server answers with, by the ``error`` kind it writes: each rebuilt with the one-line detail.
_BY_KIND: dict[str, type[e.PmemError]] = {c.kind: c for c in (
    e.InvalidOperation, e.StoreUnavailable, e.StoreClosed, e.DeadlinePassed, e.WorkerAlreadyRunning,
    e.EmbedderUnavailable, e.EmbedderBadResponse, e.JudgeUnavailable, e.ProjectionStopped, e.UnknownProjection,
    e.ExtractorNotConfigured, e.ReaderNotConfigured, e.Unauthorized, e.Forbidden)}


@dataclass(frozen=True)
class Retries:
    """How often, and how long, a request answered 503 with ``Retry-After`` is sent again: the server
    wrote nothing (a deadline passed, or other writers kept winning), and writes carry op ids."""

    attempts: int = 3
    longest_wait_s: float = 5.0

    def wait(self, status: int, retry_after: str | None, attempt: int) -> float | None:
        """Seconds to wait before resending (``attempt`` resends made so far), or None: do not resend."""
        if status != 503 or retry_after is None or attempt >= self.attempts:
            return None
        try:
            seconds = float(retry_after)
        except ValueError:
            return None  # an HTTP date: not what pmem serve sends
        return min(max(seconds, 0.0), self.longest_wait_s)


JSON = {"Content-Type": "application/json"}


def encoded(body: Any) -> bytes | None:
    """A request body as JSON; a value JSON cannot carry is bad input, named."""
    if body is None:
        return None
    try:
        return json.dumps(body, allow_nan=False).encode()
    except (TypeError, ValueError) as err:
        raise e.InvalidOperation(f"the request cannot be sent as JSON: {err}") from None


def answer_of(status: int, content: bytes) -> Any:
    """An answer's JSON; an error answer raised as its error."""
    try:
        data = json.loads(content) if content else None
    except ValueError:
        data = content[:200].decode("utf-8", "replace")
    if status >= 400:
        raise error_of(status, data)
    return data


@dataclass(frozen=True)
class Request:
    """One HTTP request of a call: method, path (under the server's URL), query and JSON body."""

    method: str
    path: str
    params: dict[str, Any] = field(default_factory=dict)
    body: Any = None


def error_of(status: int, answer: Any) -> e.PmemError:
    """The error an error answer stands for: the class the server raised, with its detail, field and line."""
    if not isinstance(answer, dict) or not isinstance(answer.get("error"), str):
        return e.StoreError(f"the server answered {status} without a P-Mem error: {str(answer)[:200]}")
    kind, detail = answer["error"], str(answer.get("detail", ""))
    where = answer.get("field") if isinstance(answer.get("field"), str) else None
    line = answer.get("line")
    if kind == "invalid batch" and isinstance(line, int):
        return e.InvalidBatch(detail.removeprefix(f"line {line}: "), line=line, field=where)
    if kind == "limit exceeded":
        return e.LimitExceeded(detail, status, where or "body")  # the body limit is refused before routing
    if kind == "conflict":  # one kind, two errors: 409 is an op id resent with another operation
        return e.RetryConflict(detail) if status == 409 else e.ConflictRetriesExhausted(detail)
    cls = _BY_KIND.get(kind)
    if cls is not None and cls is not e.InvalidOperation:
        return cls(detail)
    if status in (400, 413, 422):
        return e.InvalidOperation(detail, field=where)
    return e.StoreError(f"{kind}: {detail}") if status >= 500 else e.PmemError(f"{kind}: {detail}")


def decoded(answer: Any, kind: type[T], what: str) -> T:
    """``answer`` as ``kind`` (a dataclass of the domain), or a :class:`StoreError` naming ``what``."""
    try:
        return msgspec.convert(answer, kind, strict=False)
    except msgspec.ValidationError as err:
        raise e.StoreError(f"the server's answer is not {what}: {err}") from None


def receipt(d: Any) -> Receipt:
    """A receipt from its JSON (the notes ``source_set`` and ``trust_capped`` have no place in it)."""
    try:
        head = None if d["head"] is None else Head(str(d["head"]["value"]), str(d["head"]["status"]))
        return Receipt(int(d["event_index"]), str(d["namespace"]), str(d["key"]), str(d["op"]),
                       str(d["requested"]), bool(d["applied"]), d.get("reason"), head, d.get("op_id"),
                       bool(d.get("duplicate", False)))
    except (KeyError, TypeError, ValueError) as err:
        raise e.StoreError(f"the server's answer is not a receipt: {err!r}") from None


def receipts(answer: Any) -> list[Receipt]:
    if not isinstance(answer, list):
        raise e.StoreError("the server's answer is not a list of receipts")
    return [receipt(d) for d in answer]


def cell(answer: Any) -> CellView:
    return decoded(answer, CellView, "a cell")


def history(answer: Any) -> History:
    return decoded(answer, History, "a history")


def search_results(answer: Any) -> list[SearchResult]:
    if not isinstance(answer, list):
        raise e.StoreError("the server's answer is not a list of search results")
    return [SearchResult(cell(d), float(d.get("score", 0.0)), str(d.get("matched", ""))) for d in answer]


def read_result(answer: Any) -> ReadResult:
    return decoded(answer, ReadResult, "a read")
