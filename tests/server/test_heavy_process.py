"""Heavy reads in a process of their own: a real ``pmem serve`` forwards searches, reads, ``next`` and the
other reads of many cells to its child process, which answers them as one process would, while the
server answers a cell's reads itself; a child that died is started again, and the child ends with its
server, even one killed with SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import httpx

from tests.server.http_servers import add_key, bearer, pmem, served, serving
from tests.server.processes import descendants, parents, running

HEAVY = [("GET", "/v1/search?q=city&k=5&namespace=team", None),
         ("POST", "/v1/read?namespace=team", {"question": "where is city 3", "k": 5}),
         ("GET", "/v1/next?k=3&namespace=team", None),
         ("GET", "/v1/frontier?namespace=team&limit=5", None),
         ("GET", "/v1/log?namespace=team&limit=5", None),
         ("GET", "/v1/inspect/summary?namespace=team", None)]


def _store(tmp_path: Path) -> tuple[str, str]:
    """A store of 30 cells in namespace ``team``, and a token for it."""
    db = str(tmp_path / "store.db")
    lines = tmp_path / "ops.jsonl"
    lines.write_text("".join(json.dumps({"op": "accept", "key": f"k{i}", "value": f"city person {i}"}) + "\n"
                             for i in range(30)))
    out = pmem(db, "--namespace", "team", "apply", str(lines))
    assert out.returncode == 0, out.stderr
    return db, add_key(db, "team", source="agent", max_trust=50)["token"]


def _heavy_child(server: int, deadline_s: float = 30) -> int:
    """The pid of ``server``'s heavy process (its child started by multiprocessing's spawn)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        for pid in descendants(server):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"spawn_main" in cmdline and parents().get(pid) == server:
                return pid
        time.sleep(0.1)
    raise AssertionError(f"no heavy process under {server}")


def _send(url: str, token: str | None, request: tuple[str, str, Any]) -> httpx.Response:
    method, path, body = request
    return httpx.request(method, url + path, json=body, headers=bearer(token) if token else {}, timeout=60)


def test_heavy_reads_are_answered_by_the_child_as_by_one_process(tmp_path: Path) -> None:
    db, token = _store(tmp_path)
    with served(db) as (url, proc):
        _heavy_child(proc.pid)
        apart = [_send(url, token, r) for r in HEAVY]
        tokenless = _send(url, None, HEAVY[0])
        other = _send(url, token, ("GET", "/v1/search?q=city&namespace=elsewhere", None))
    with served(db, "--no-heavy-process") as (url, proc):
        assert not any(b"spawn_main" in Path(f"/proc/{p}/cmdline").read_bytes() for p in descendants(proc.pid))
        alone = [_send(url, token, r) for r in HEAVY]
    assert [r.status_code for r in apart] == [200] * len(HEAVY)
    assert [r.json() for r in apart] == [r.json() for r in alone]
    assert apart[0].json() and all(hit["value"].startswith("city person") for hit in apart[0].json())
    assert tokenless.status_code == 401 and tokenless.headers["www-authenticate"] == "Bearer"
    assert other.status_code == 403


def test_a_cell_is_read_while_the_heavy_process_is_stopped(tmp_path: Path) -> None:
    db, token = _store(tmp_path)
    with served(db, "--deadline", "2") as (url, proc):
        child = _heavy_child(proc.pid)
        warm = time.monotonic() + 60  # the child's first search (its index loaded) may take past 2 s
        while _send(url, token, HEAVY[0]).status_code != 200:
            assert time.monotonic() < warm, "the heavy process never answered"
        os.kill(child, signal.SIGSTOP)
        try:
            got = _send(url, token, ("GET", "/v1/cells/k3?namespace=team", None))
            stalled = _send(url, token, HEAVY[0])
        finally:
            os.kill(child, signal.SIGCONT)
        after = _send(url, token, HEAVY[0])
    assert got.status_code == 200 and got.json()["value"] == "city person 3"  # (the child could answer nothing)
    assert stalled.status_code == 503 and stalled.json()["error"] == "deadline passed"
    assert stalled.headers["retry-after"] == "1"
    assert after.status_code == 200


def test_a_heavy_process_that_died_is_started_again(tmp_path: Path) -> None:
    db, token = _store(tmp_path)
    with served(db) as (url, proc):
        child = _heavy_child(proc.pid)
        before = _send(url, token, HEAVY[0])
        os.kill(child, signal.SIGKILL)
        after = _send(url, token, HEAVY[0])
        again = _heavy_child(proc.pid)
    assert before.status_code == after.status_code == 200
    assert after.json() == before.json()
    assert again != child


def test_the_heavy_process_ends_with_its_server_killed(tmp_path: Path) -> None:
    db, token = _store(tmp_path)
    with serving(db) as url:  # a server whose store another server's writes reach
        assert _send(url, token, ("POST", "/v1/ops?namespace=team",
                                  [{"op": "accept", "key": "k1", "value": "city person one"}])).status_code == 200
    with served(db) as (url, proc):
        child = _heavy_child(proc.pid)
        assert _send(url, token, HEAVY[2]).status_code == 200  # next: its score worker's processes start
        below = descendants(child)
        proc.kill()
        proc.wait()
        end = time.monotonic() + 30
        while running(child, *below) and time.monotonic() < end:
            time.sleep(0.2)
        left = running(child, *below)
    assert below, "the score worker started no process"
    assert not left, f"left running after the server was killed: {sorted(left)}"
