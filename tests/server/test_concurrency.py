"""Many tenants on one ``pmem serve`` process: a request kept waiting does not stall another tenant's
``get``, and a request past the deadline answers 503 with ``Retry-After`` and leaves no effect. The slow
request is made real and certain by holding the SQLite file's write lock from the test (``BEGIN
IMMEDIATE`` on a connection of its own), as a long write by another process would."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

import pmem
from tests.server.http_servers import add_key, bearer, serving


@contextmanager
def write_lock(db: str) -> Iterator[sqlite3.Connection]:
    """The database's write lock, held by another connection (given) until the block ends."""
    conn = sqlite3.connect(db, timeout=30, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        yield conn
        conn.execute("ROLLBACK")
    finally:
        conn.close()


class InThread:
    """One HTTP request sent on a thread of its own; ``done`` once it is answered."""

    def __init__(self, method: str, url: str, **kwargs: Any) -> None:
        self.response: httpx.Response | None = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._send, args=(method, url), kwargs=kwargs, daemon=True)
        self.thread.start()

    def _send(self, method: str, url: str, **kwargs: Any) -> None:
        try:
            self.response = httpx.request(method, url, timeout=120, **kwargs)
        finally:
            self.done.set()


def _tenants(db: str) -> tuple[dict[str, str], dict[str, str]]:
    with pmem.open(db, embedder="hashing") as store:
        store.accept("secret", "b's value", namespace="b")
    a = add_key(db, "a", source="agent-a", max_trust=80)
    b = add_key(db, "b", source="agent-b", max_trust=80)
    return bearer(a["token"]), bearer(b["token"])


def _events(db: str) -> int:
    with pmem.open(db, embedder="hashing") as store:
        return store.last_index()


def test_a_write_kept_waiting_does_not_stall_another_tenants_get(tmp_path: Path) -> None:
    db = str(tmp_path / "mem.db")
    a, b = _tenants(db)
    with serving(db, "--deadline", "60") as url:
        assert httpx.get(f"{url}/v1/cells/secret", headers=b).status_code == 200  # caught up before the lock
        with write_lock(db):
            slow = InThread("POST", f"{url}/v1/ops", headers=a,
                            json=[{"op": "accept", "key": "office", "value": "Madrid"}])
            time.sleep(0.5)  # the write has reached the server and waits for the lock
            got = httpx.get(f"{url}/v1/cells/secret", headers=b, timeout=30)
            still_running = not slow.done.is_set()
        assert got.status_code == 200 and got.json()["value"] == "b's value", got.text
        assert still_running, "the write should still have been waiting for the lock"
        assert slow.done.wait(60) and slow.response is not None and slow.response.status_code == 200, slow.response


def test_a_write_past_the_deadline_is_503_with_retry_after_and_leaves_the_log_unchanged(tmp_path: Path) -> None:
    db = str(tmp_path / "mem.db")
    a, _ = _tenants(db)
    before = _events(db)
    with serving(db, "--deadline", "1") as url:
        with write_lock(db):
            late = InThread("POST", f"{url}/v1/ops", headers=a,
                            json=[{"op": "accept", "key": f"k{i}", "value": "v"} for i in range(50)])
            time.sleep(2.5)  # past the deadline while the write waits
        assert late.done.wait(60) and late.response is not None
        r = late.response
        assert r.status_code == 503 and r.headers["Retry-After"] == "1", r.text
        assert r.json()["error"] == "deadline passed" and "--deadline" in r.json()["detail"], r.text
        assert httpx.get(f"{url}/v1/log", headers=a).json() == []
    assert _events(db) == before


def test_a_read_past_the_deadline_is_answered_503_while_its_work_still_waits(tmp_path: Path) -> None:
    """A page of the frontier must fold what its namespace lacks, and waits for that. (Not a point read: one
    that finds the server's catch-up thread folding answers from the log at once, docs/server.md.)"""
    db = str(tmp_path / "mem.db")
    _, b = _tenants(db)
    with serving(db, "--deadline", "1") as url:
        assert httpx.get(f"{url}/v1/cells/secret", headers=b).status_code == 200
        for attempt in range(5):
            with pmem.open(db, embedder="hashing") as store:
                store.accept("secret", f"newer {attempt}", namespace="b")  # the server must catch up: it needs the lock
            with write_lock(db) as conn:
                if not _frontier_behind(conn):  # the server's thread folded it before the lock was taken
                    continue
                started = time.monotonic()
                r = httpx.get(f"{url}/v1/frontier", params={"limit": 5}, headers=b, timeout=30)
                waited = time.monotonic() - started
            break
        else:
            pytest.fail("the server folded every write before the lock could be taken")
        assert r.status_code == 503 and r.headers["Retry-After"] == "1", r.text
        assert waited < 20, waited  # answered at the deadline, not when the lock was let go
        assert httpx.get(f"{url}/v1/cells/secret", headers=b).json()["value"] == f"newer {attempt}"


def _frontier_behind(conn: sqlite3.Connection) -> bool:
    """Whether the frontier projection has not yet applied the log's last event."""
    last = conn.execute("SELECT max(rowid) FROM stored_events").fetchone()[0]
    row = conn.execute("SELECT position FROM pmem_tracking WHERE name = 'frontier'").fetchone()
    return row is None or int(row[0]) < last
