"""What only the remote store has: the server's refusals mapped one to one onto P-Mem's errors, the
bounded resend of a request answered 503 with ``Retry-After``, methods the HTTP API does not serve, and
the async form. Against a real server over HTTP, on SQLite and PostgreSQL (the lock-held retry on SQLite)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path

import pytest

import pmem
from pmem.adapters.servers.limits import Limits
from pmem.adapters.service.credentials import Credentials
from tests.contract.conftest import SETTINGS, SOURCE, Served, uvicorn_serving
from tests.server.http_servers import free_port

EV = {"source": SOURCE, "trust": 60}


def test_a_missing_unknown_or_revoked_token_is_unauthorized(served: Served, namespace: str) -> None:
    with pmem.connect(served.url, namespace=namespace) as anonymous, pytest.raises(pmem.Unauthorized):
        anonymous.get("k")
    with pmem.connect(served.url, "pmem_0123456789ab_junk") as junk, pytest.raises(pmem.Unauthorized):
        junk.get("k")
    cred, token = Credentials(served.admin.projection_db).add([namespace], SOURCE, 100)
    with pmem.connect(served.url, token) as store:
        assert store.get("k").status == "empty"
        Credentials(served.admin.projection_db).revoke(cred.key_id)
        with pytest.raises(pmem.Unauthorized, match="revoked|unknown|token"):
            store.get("k")


def test_another_namespace_and_a_read_only_write_are_forbidden(served: Served, namespace: str) -> None:
    with pmem.connect(served.url, served.token(namespace)) as store:
        assert store.namespace is None and store.accept("k", "v", **EV).namespace == namespace  # the first one
        with pytest.raises(pmem.Forbidden):
            store.get("k", namespace="someone-else")
        with pytest.raises(pmem.Forbidden):
            store.accept("k", "v", namespace="someone-else")
    with pmem.connect(served.url, served.token(namespace, read_only=True)) as reader:
        assert reader.get("k").value == "v"
        with pytest.raises(pmem.Forbidden, match="read-only"):
            reader.accept("k", "w")


def test_the_credential_sets_the_source_and_caps_the_trust(served: Served, namespace: str) -> None:
    with pmem.connect(served.url, served.token(namespace, max_trust=40), namespace=namespace) as store:
        store.accept("k", "v", source="someone", trust=90)
        v = store.history("k").versions[0]
        assert (v.sources, v.trust) == ((SOURCE,), 40)


def test_requests_over_the_servers_limits_raise_limit_exceeded(served: Served, namespace: str) -> None:
    with pmem.connect(served.url, served.token(namespace), namespace=namespace) as store:
        with pytest.raises(pmem.LimitExceeded) as batch:
            store.apply([{"op": "accept", "key": f"k{i}", "value": "v"} for i in range(101)])
        assert (batch.value.status, batch.value.field) == (413, "batch") and "--max-batch" in str(batch.value)
        with pytest.raises(pmem.LimitExceeded) as k:
            store.search("anything", k=101)
        assert (k.value.status, k.value.field) == (422, "k")
        assert isinstance(k.value, pmem.InvalidOperation) and store.frontier() == []  # nothing was written


def test_an_op_id_resent_with_another_value_is_a_retry_conflict(served: Served, namespace: str) -> None:
    """The server's resend rule is strict (docs/server.md, "Retries"): key, op, value and source must
    repeat; the local store decides by the op id alone (SPEC §4)."""
    with pmem.connect(served.url, served.token(namespace), namespace=namespace) as store:
        store.accept("k", "1", op_id="once", **EV)
        with pytest.raises(pmem.RetryConflict):
            store.accept("k", "2", op_id="once", **EV)
        assert store.get("k").value == "1"


def test_a_write_without_an_op_id_gets_one_so_a_resend_cannot_double_it(served: Served, namespace: str) -> None:
    with pmem.connect(served.url, served.token(namespace), namespace=namespace) as store:
        receipts = store.apply([{"op": "accept", "key": "a", "value": "1"}, {"op": "support", "key": "a"}])
        ids = [r.op_id for r in receipts] + [store.accept("b", "2").op_id]
        assert all(isinstance(i, str) and len(i) == 32 for i in ids) and len(set(ids)) == 3


def test_methods_the_api_does_not_serve_raise_not_served_naming_them(served: Served, namespace: str) -> None:
    with pmem.connect(served.url, served.token(namespace)) as store:
        for name in ("forget", "rebuild", "catch_up", "doctor", "graph", "migrate_keys", "apply_stream"):
            with pytest.raises(pmem.NotServed, match=f"^{name} is not served"):
                getattr(store, name)()
        with pytest.raises(NotImplementedError, match="frontier"):
            store.frontier(system=True)


def test_a_server_that_cannot_be_reached_is_store_unavailable(namespace: str) -> None:
    with pmem.connect(f"http://127.0.0.1:{free_port()}", "t") as store, pytest.raises(pmem.StoreUnavailable):
        store.get("k")
    with pytest.raises(pmem.InvalidOperation) as bad:
        pmem.connect("localhost:8765")
    assert bad.value.field == "url"


def test_the_async_form_has_the_same_methods_and_types(served: Served, namespace: str) -> None:
    async def scenario() -> None:
        async with pmem.connect_async(served.url, served.token(namespace), namespace=namespace) as store:
            first = await store.accept("5K PB", "27:12", **EV)
            await store.accept("5K PB", "25:50", **EV)
            assert isinstance(first, pmem.Receipt) and first.head == pmem.Head("27:12", "active")
            assert (await store.get("5K PB")).value == "25:50"
            assert (await store.get("5K PB", as_of=first.event_index)).value == "27:12"
            assert [v.status for v in (await store.history("5K PB")).versions] == ["superseded", "active"]
            assert [c.key for c in await store.frontier()] == ["5k_pb"]
            assert (await store.search("5K PB", k=2))[0].cell.key == "5k_pb"
            with pytest.raises(pmem.InvalidBatch):
                await store.apply([{"op": "nope", "key": "k"}])
            with pytest.raises(pmem.Forbidden):
                await store.get("k", namespace="someone-else")
        with pytest.raises(pmem.StoreClosed):
            await store.get("k")

    asyncio.run(scenario())


def test_a_503_past_the_deadline_is_resent_after_retry_after_and_the_write_lands_once(tmp_path: Path) -> None:
    """The write waits on the SQLite file's write lock, held from outside, past the server's deadline:
    503 with ``Retry-After: 1``, nothing written. The client resends after a second; the lock is gone by
    then, so the resend is recorded, once."""
    db = str(tmp_path / "mem.db")
    with pmem.open(db, **SETTINGS) as admin:
        admin.accept("warm", "up", namespace="team")
        token = Credentials(admin.projection_db).add(["team"], SOURCE, 100)[1]
    with uvicorn_serving(db, Limits(deadline_s=0.5)) as url, pmem.connect(url, token) as store:
        assert store.get("warm").value == "up"  # the server is caught up before the lock
        lock = sqlite3.connect(db, timeout=30, isolation_level=None, check_same_thread=False)
        lock.execute("BEGIN IMMEDIATE")
        release = threading.Timer(1.0, lambda: lock.execute("ROLLBACK"))
        release.start()
        started = time.monotonic()
        r = store.accept("office", "Madrid", **EV)
        release.join()
        lock.close()
        assert time.monotonic() - started >= 2.0 and r.applied and not r.duplicate  # the lock, then Retry-After
        assert [e["key"] for e in store.log()].count("office") == 1
    with uvicorn_serving(db, Limits(deadline_s=0.3)) as url, pmem.connect(url, token, retries=0) as store:
        lock = sqlite3.connect(db, timeout=30, isolation_level=None, check_same_thread=False)
        lock.execute("BEGIN IMMEDIATE")
        release = threading.Timer(1.0, lambda: lock.execute("ROLLBACK"))
        release.start()
        with pytest.raises(pmem.DeadlinePassed, match="deadline"):  # no resend allowed: the 503 is raised
            store.accept("office", "Paris", **EV)
        release.join()
        lock.close()
        assert store.get("office").value == "Madrid"
