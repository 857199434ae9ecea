"""Several ``pmem serve`` processes on one store.

- Two servers on one PostgreSQL schema, each with its own local caches (its own FAISS index): a write
  through either is readable, and searchable, through the other within the projection lag.
- 16 clients writing through ``pmem serve --workers 2`` for 60 s (``slow``): every acknowledged
  operation is in the log exactly once, and the log holds nothing that was not acknowledged.
"""

from __future__ import annotations

import os
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

import pmem
from tests.conftest import PG_URL, SKIP_PG
from tests.server.http_servers import add_key, bearer, serving

# Long enough for thousands of batches across both server processes; PMEM_HTTP_SOAK_SECONDS lengthens it.
SOAK_SECONDS = float(os.environ.get("PMEM_HTTP_SOAK_SECONDS", "15"))
CLIENTS = 16


def _poll(check: Callable[[], bool], seconds: float = 20) -> float:
    """Seconds until ``check()`` holds (fails after ``seconds``)."""
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < seconds, "not visible through the other process in time"
        time.sleep(0.05)
    return time.monotonic() - start


@pytest.fixture
def pg_url() -> Any:
    if SKIP_PG:
        pytest.skip("PostgreSQL cases skipped on request (PMEM_TEST_SKIP_PG=1)")
    if not PG_URL:
        pytest.fail("PMEM_TEST_PG is not set: run scripts/test.sh, or set PMEM_TEST_SKIP_PG=1")
    import psycopg

    from pmem.adapters.storage.backend import PgBackend

    schema = f"http_{uuid.uuid4().hex[:12]}"
    yield f"{PG_URL}?schema={schema}"
    with psycopg.connect(**PgBackend.from_url(PG_URL).conninfo, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_two_servers_on_one_postgresql_schema_see_each_others_writes(pg_url: str, tmp_path: Path) -> None:
    key = add_key(pg_url, "team", source="agent", max_trust=70)
    auth = bearer(key["token"])
    with serving(pg_url, cache=tmp_path / "cache-1") as one, serving(pg_url, cache=tmp_path / "cache-2") as two:
        for writer, reader, n in ((one, two, 1), (two, one, 2)):
            value = f"Lisbon-{n}"
            r = httpx.post(f"{writer}/v1/ops", headers=auth, json=[{"op": "accept", "key": f"office {n}",
                                                                     "value": value, "trust": 90}])
            assert r.status_code == 200 and r.json()[0]["trust_capped"]["applied"] == 70, r.text
            _poll(lambda url=reader, k=f"office {n}", v=value: _value(url, auth, k) == v)
            _poll(lambda url=reader, q=f"office {n}: {value}", v=value: v in _found(url, auth, q))
        hist = httpx.get(f"{one}/v1/cells/office 2/history", headers=auth).json()
        assert hist["versions"][0]["sources"] == ["agent"] and hist["versions"][0]["trust"] == 70
    assert any((tmp_path / f"cache-{i}").rglob("*") for i in (1, 2))  # each process kept its own caches


def _value(url: str, auth: dict[str, str], key: str) -> Any:
    return httpx.get(f"{url}/v1/cells/{key}", headers=auth).json()["value"]


def _found(url: str, auth: dict[str, str], q: str) -> list[Any]:
    return [h["value"] for h in httpx.get(f"{url}/v1/search", headers=auth, params={"q": q, "k": 3}).json()]


@pytest.mark.slow
def test_sixteen_clients_writing_for_a_soak_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    db = str(tmp_path / "mem.db")
    key = add_key(db, "soak", source="writer", max_trust=80)
    acked: dict[str, int] = {}  # op_id -> event index its receipt gave
    lock = threading.Lock()
    errors: list[str] = []

    def client(i: int, url: str, stop: float) -> None:
        rng = random.Random(i)
        with httpx.Client(base_url=url, headers=bearer(key["token"]), timeout=30) as c:
            n = 0
            while time.monotonic() < stop:
                ops = [{"op": rng.choice(["accept", "contest", "support"]), "key": f"key{rng.randint(0, 30)}",
                        "value": f"v{i}-{n}-{j}", "op_id": f"c{i}-{n}-{j}"} for j in range(rng.randint(1, 4))]
                receipts = _send_until_answered(c, ops, errors)
                with lock:
                    for op, r in zip(ops, receipts, strict=True):
                        if acked.setdefault(op["op_id"], r["event_index"]) != r["event_index"]:
                            errors.append(f"{op['op_id']} answered with two event indexes")
                n += 1

    with serving(db, "--workers", "2") as url:
        stop = time.monotonic() + SOAK_SECONDS
        threads = [threading.Thread(target=client, args=(i, url, stop)) for i in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors, errors[:5]
    with pmem.open(db) as store:
        logged = Counter(e["op_id"] for e in store.log(namespace="soak"))
        indexes = {e["op_id"]: e["event_index"] for e in store.log(namespace="soak")}
    assert len(acked) > CLIENTS * 10
    assert [o for o, c in logged.items() if c > 1] == []  # nothing duplicated
    assert set(logged) == set(acked)  # nothing lost, nothing unacknowledged
    assert indexes == acked  # and each where its receipt said


def _send_until_answered(c: httpx.Client, ops: list[dict[str, Any]], errors: list[str]) -> list[dict[str, Any]]:
    """POST ``ops``, resending the same op_ids after a transport error or a 503 (as a client should)."""
    for _ in range(20):
        try:
            r = c.post("/v1/ops", json=ops)
        except httpx.TransportError:
            continue
        if r.status_code == 200:
            return list(r.json())
        if r.status_code != 503:
            errors.append(f"{r.status_code}: {r.text}")
            return [{"event_index": None}] * len(ops)
        time.sleep(0.05)  # the server said try again (Retry-After); the same op ids make the resend safe
    raise AssertionError("the server never answered")
