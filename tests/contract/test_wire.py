"""The remote store's wire rules without a server: each error answer the HTTP API gives becomes the
error class the server raised, with its field and line, and a 503 is resent only as ``Retry-After`` says."""

from __future__ import annotations

import sys

import pytest

import pmem
from pmem.adapters.client.wire import Retries, answer_of, error_of
from pmem.domain import errors


@pytest.mark.parametrize(("status", "kind", "cls"), [
    (401, "unauthorized", pmem.Unauthorized), (403, "forbidden", pmem.Forbidden),
    (409, "conflict", pmem.RetryConflict), (503, "conflict", pmem.ConflictRetriesExhausted),
    (503, "store unavailable", pmem.StoreUnavailable), (503, "store closed", pmem.StoreClosed),
    (503, "deadline passed", pmem.DeadlinePassed), (503, "embedder unavailable", pmem.EmbedderUnavailable),
    (503, "projection stopped", pmem.ProjectionStopped), (400, "unknown projection", errors.UnknownProjection),
    (400, "reader not configured", errors.ReaderNotConfigured), (400, "invalid request", pmem.InvalidOperation),
    (422, "limit exceeded", pmem.LimitExceeded), (500, "internal error", pmem.StoreError),
    (404, "not found", pmem.PmemError),
])
def test_each_error_answer_is_the_error_the_server_raised(status: int, kind: str, cls: type) -> None:
    e = error_of(status, {"error": kind, "detail": "what went wrong"})
    assert type(e) is cls and "what went wrong" in str(e)


def test_bad_input_keeps_its_field_and_a_batch_its_line() -> None:
    e = error_of(400, {"error": "invalid batch", "detail": "line 3: missing 'value'", "field": "value", "line": 3})
    assert isinstance(e, pmem.InvalidBatch) and (str(e), e.line, e.field) == ("line 3: missing 'value'", 3, "value")
    e = error_of(400, {"error": "invalid operation", "detail": "'key' is empty", "field": "key"})
    assert type(e) is pmem.InvalidOperation and e.field == "key"
    e = error_of(413, {"error": "limit exceeded", "detail": "request body too large"})
    assert isinstance(e, pmem.LimitExceeded) and (e.status, e.field) == (413, "body")


def test_an_answer_that_is_not_a_pmem_error_is_named_as_such() -> None:
    with pytest.raises(pmem.StoreError, match="502 without a P-Mem error: <html>"):
        answer_of(502, b"<html>bad gateway</html>")
    assert answer_of(200, b'{"a": 1}') == {"a": 1}


def test_a_503_is_resent_only_with_retry_after_and_a_bounded_number_of_times() -> None:
    r = Retries(attempts=2, longest_wait_s=5)
    assert [r.wait(503, "1", n) for n in range(3)] == [1.0, 1.0, None]
    assert r.wait(503, "120", 0) == 5  # never longer than the longest wait
    assert r.wait(503, None, 0) is None and r.wait(500, "1", 0) is None and r.wait(429, "1", 0) is None


def test_without_httpx_connect_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "httpx", None)  # as if not installed: importing it fails
    for connect in (pmem.connect, pmem.connect_async):
        with pytest.raises(pmem.MissingExtra, match=r"^httpx is not installed: pip install 'pmem\[server\]'$"):
            connect("http://127.0.0.1:1", "token")
