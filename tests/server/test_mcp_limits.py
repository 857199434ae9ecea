"""The same limits and deadline in ``pmem mcp``, met through the official SDK's client session on real
server processes: a call over a limit is a tool error naming it, a write past the deadline is a tool error
and writes nothing, and an HTTP body over the limit is refused with 413."""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx
import pytest

import pmem
from tests.e2e.test_mcp import Keys, http_server, run, stdio_session, text
from tests.server.test_concurrency import write_lock

LIMITS = ("--max-batch", "2", "--max-k", "3", "--max-question", "20")


@pytest.fixture
def keys(tmp_path: Path) -> Keys:
    return Keys(tmp_path / "mem.db")


def _events(keys: Keys) -> int:
    with pmem.open(keys.db, embedder="hashing") as store:
        return store.last_index()


def test_stdio_calls_over_a_limit_are_tool_errors_naming_it(keys: Keys) -> None:
    async def main() -> None:
        async with stdio_session(keys.db, keys.writer, *LIMITS) as s:
            ops = [{"op": "accept", "key": f"k{i}", "value": "v"} for i in range(3)]
            for name, args, named in (("apply", {"operations": ops}, "--max-batch"),
                                      ("search", {"query": "k1", "k": 3 + 1}, "--max-k"),
                                      ("read", {"question": "q" * 21}, "--max-question"),
                                      ("what_next", {"k": 4}, "--max-k")):
                r = await s.call_tool(name, args)
                assert r.is_error and named in text(r) and len(text(r).splitlines()) == 1, (name, text(r))
            assert _events(keys) == 0
            assert not (await s.call_tool("apply", {"operations": ops[:2]})).is_error
            assert not (await s.call_tool("search", {"query": "k1", "k": 3})).is_error
    run(main)


def test_a_write_past_the_deadline_is_a_tool_error_and_writes_nothing(keys: Keys) -> None:
    async def main() -> None:
        async with stdio_session(keys.db, keys.writer, "--deadline", "1") as s:
            ops = [{"op": "accept", "key": "office", "value": "Madrid"}]
            answers: list[str] = []

            async def call() -> None:
                r = await s.call_tool("apply", {"operations": ops})
                answers.append(text(r) if r.is_error else "written")

            async with anyio.create_task_group() as tg:
                with write_lock(str(keys.db)):
                    tg.start_soon(call)
                    await anyio.sleep(2.5)  # past the deadline while the write waits for the lock
            assert len(answers) == 1 and "DeadlinePassed" in answers[0] and "--deadline" in answers[0], answers
            assert _events(keys) == 0
    run(main)


def test_an_http_body_over_the_limit_is_413(keys: Keys) -> None:
    with http_server(keys.db, "--max-body", "500") as url:
        r = httpx.post(url, json={"padding": "x" * 600}, headers={"Authorization": f"Bearer {keys.writer}"})
        assert r.status_code == 413 and "--max-body" in r.json()["detail"], r.text
