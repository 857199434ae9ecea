"""The limits on one request's work (docs/server.md, "Limits"), each set low on a real ``pmem serve`` and
each met over HTTP: a body or batch over its limit is 413, a ``k``, ``limit`` or question over its limit is
422, each naming the limit, its value and its option, and nothing over a limit is written."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server.http_servers import add_key, bearer, pmem, serving

LIMITS = ["--max-batch", "5", "--max-k", "7", "--max-limit", "9", "--max-question", "50", "--max-body", "2000"]


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, str]]:
    db = str(tmp_path_factory.mktemp("limits") / "mem.db")
    key = add_key(db, "a", source="agent-a", max_trust=80)
    with serving(db, *LIMITS) as url, httpx.Client(base_url=url, headers=bearer(key["token"]), timeout=60) as c:
        yield c, db


def _ops(n: int, value: str = "v") -> list[dict[str, Any]]:
    return [{"op": "accept", "key": f"k{i}", "value": value} for i in range(n)]


def _refused(r: httpx.Response, status: int, *named: str) -> None:
    assert r.status_code == status, r.text
    body = r.json()
    assert body["error"] == "limit exceeded" and all(n in body["detail"] for n in named), body


def test_a_batch_over_the_limit_is_413_and_writes_nothing(api: tuple[httpx.Client, str]) -> None:
    c, _ = api
    _refused(c.post("/v1/ops", json=_ops(6)), 413, "6 operations", "limit is 5", "--max-batch")
    _refused(c.post("/v1/ingest", json=["My city is Oslo."] * 6), 413, "6 records", "--max-batch")
    assert c.get("/v1/log").json() == []
    assert c.post("/v1/ops", json=_ops(5)).status_code == 200


def test_a_body_over_the_limit_is_413_by_its_length_or_as_it_streams(api: tuple[httpx.Client, str]) -> None:
    c, _ = api
    before = c.get("/v1/log").json()
    _refused(c.post("/v1/ops", json=_ops(1, "x" * 3000)), 413, "limit is 2000", "--max-body")

    def chunks() -> Iterator[bytes]:  # no Content-Length: the body is counted as it arrives
        yield b'[{"op": "accept", "key": "big", "value": "'
        yield b"y" * 3000
        yield b'"}]'

    r = c.post("/v1/ops", content=chunks(), headers={"Content-Type": "application/json"})
    _refused(r, 413, "limit is 2000", "--max-body")
    assert c.get("/v1/log").json() == before


@pytest.mark.parametrize(("path", "params", "named"), [
    ("/v1/search", {"q": "k1", "k": 8}, "k=8"),
    ("/v1/next", {"k": 8}, "k=8"),
    ("/v1/frontier", {"limit": 10}, "limit=10"),
    ("/v1/log", {"limit": 10}, "limit=10"),
    ("/v1/search", {"q": "q" * 51}, "51 characters"),
])
def test_a_read_over_a_limit_is_422_naming_it(api: tuple[httpx.Client, str], path: str, params: dict[str, Any],
                                              named: str) -> None:
    c, _ = api
    option = "--max-question" if "characters" in named else ("--max-k" if "k=" in named else "--max-limit")
    _refused(c.get(path, params=params), 422, named, option)


def test_a_read_body_over_a_limit_is_422_and_within_it_answers(api: tuple[httpx.Client, str]) -> None:
    c, _ = api
    _refused(c.post("/v1/read", json={"question": "where?", "k": 8}), 422, "k=8", "--max-k")
    _refused(c.post("/v1/read", json={"question": "w" * 51}), 422, "51 characters", "limit is 50", "--max-question")
    assert c.post("/v1/read", json={"question": "where is k1?", "k": 7}).status_code == 200
    assert c.get("/v1/search", params={"q": "k1", "k": 7}).status_code == 200


def test_the_log_without_a_limit_answers_one_page_of_the_limit(api: tuple[httpx.Client, str]) -> None:
    c, _ = api
    for _ in range(3):
        assert c.post("/v1/ops", json=_ops(5, "w")).status_code == 200
    page = c.get("/v1/log").json()
    assert len(page) == 9
    rest = c.get("/v1/log", params={"after": page[-1]["event_index"]}).json()
    assert rest and rest[0]["event_index"] > page[-1]["event_index"]


def test_a_bad_limit_option_is_a_one_line_usage_error(tmp_path: Path) -> None:
    db = str(tmp_path / "mem.db")
    for option, value in (("--max-k", "0"), ("--deadline", "-1"), ("--connections", "0"), ("--heavy", "0")):
        out = pmem(db, "serve", "--insecure-local", option, value)
        assert out.returncode == 2 and option in out.stderr and len(out.stderr.strip().splitlines()) == 1, out
