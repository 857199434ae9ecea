"""Three ways one tenant of a shared server could reach past its credential, over HTTP (real ``pmem
serve`` driven by httpx) and over MCP (real ``pmem mcp`` driven by the official SDK's client):

- an ``--insecure-local`` server shuts to callers without a token once the store has a credential;
- an ``op_id`` another credential used first is refused (409), never answered with that credential's
  receipt, and the refusal says nothing of the other operation;
- the global event index a tenant sees (receipts, ``as_of``, the inspector's summary) is the one side
  channel kept (docs/server.md, "Security notes"): it carries no other namespace's keys or values.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from mcp import ClientSession
from mcp.shared.exceptions import MCPError

from pmem import open as pmem_open
from tests.e2e.test_mcp import http_server, http_session, run, stdio_session, text
from tests.server.http_servers import add_key, bearer, pmem, serving

SQUAT = {"op": "accept", "key": "office", "value": "EVIL-SQUAT", "op_id": "a-office-2026-12-04"}
MADRID = {**SQUAT, "value": "Madrid"}


def test_an_insecure_local_server_shuts_to_tokenless_requests_once_a_key_is_added(tmp_path: Path) -> None:
    db = str(tmp_path / "mem.db")
    spoof = [{"op": "accept", "key": "k", "value": "NO-TOKEN-WRITE", "trust": 100, "source": "spoofed"}]
    with serving(db, "--insecure-local") as url:
        assert httpx.post(f"{url}/v1/ops", params={"namespace": "team"}, json=spoof).status_code == 200
        key = add_key(db, "team", source="agent", max_trust=20)
        for r in (httpx.post(f"{url}/v1/ops", params={"namespace": "team"}, json=spoof),
                  httpx.get(f"{url}/v1/cells/k", params={"namespace": "team"}),  # the short way for reads
                  httpx.get(f"{url}/v1/inspect/summary", params={"namespace": "team"})):
            assert r.status_code == 401 and r.json()["error"] == "unauthorized", (r.request.url, r.text)
        ok = httpx.get(f"{url}/v1/cells/k", params={"namespace": "team"}, headers=bearer(key["token"]))
        assert ok.status_code == 200 and ok.json()["value"] == "NO-TOKEN-WRITE"  # only the open write
        assert pmem(db, "keys", "revoke", key["key_id"]).returncode == 0
        r = httpx.get(f"{url}/v1/cells/k", params={"namespace": "team"})
        assert r.status_code == 401  # shut for good: revoking every key does not reopen the server


def test_an_insecure_local_mcp_server_shuts_to_tokenless_calls_once_a_key_is_added(tmp_path: Path) -> None:
    db = tmp_path / "mem.db"
    op = {"op": "accept", "key": "k", "value": "NO-TOKEN-WRITE", "trust": 100}

    async def before(session: ClientSession) -> None:
        r = await session.call_tool("apply", {"operations": [op]})
        assert not r.is_error, text(r)

    async def after(session: ClientSession) -> None:
        r = await session.call_tool("apply", {"operations": [op]})
        assert r.is_error and "Unauthorized: " in text(r), text(r)

    async def flow() -> None:
        with http_server(db, "--insecure-local") as url:
            async with stdio_session(db, None, "--insecure-local") as stdio, http_session(url, None) as session:
                await before(session)
                await before(stdio)
                add_key(str(db), "default", source="agent", max_trust=20)
                await after(stdio)
                with pytest.raises(MCPError, match="Unauthorized: missing"):  # the gate's 401, before the SDK
                    await session.call_tool("apply", {"operations": [op]})
            assert httpx.post(url, json={}).status_code == 401

    run(flow)


def test_an_op_id_squatted_by_another_credential_is_refused_without_its_details(tmp_path: Path) -> None:
    db = str(tmp_path / "mem.db")
    low = add_key(db, "team", source="low", max_trust=10)
    high = add_key(db, "team", source="agent-a", max_trust=90)
    with serving(db) as url, httpx.Client(base_url=url, params={"namespace": "team"}) as c:
        first = c.post("/v1/ops", json=[SQUAT], headers=bearer(low["token"]))
        assert first.status_code == 200 and not first.json()[0].get("duplicate")
        r = c.post("/v1/ops", json=[MADRID], headers=bearer(high["token"]))
        assert r.status_code == 409 and r.json()["error"] == "conflict", r.text
        for told in ("EVIL", "low", "accept", "event"):
            assert told not in r.json()["detail"], r.text
        # the first credential's own resend is still a duplicate, and with another value it is refused too
        again = c.post("/v1/ops", json=[SQUAT], headers=bearer(low["token"]))
        assert again.status_code == 200 and again.json()[0]["duplicate"] is True
        assert c.post("/v1/ops", json=[{**SQUAT, "value": "x"}], headers=bearer(low["token"])).status_code == 409
        # a batch repeating one op id with two different operations is refused as a whole
        both = [{**MADRID, "op_id": "m"}, {**MADRID, "op_id": "m", "value": "Rome"}, {"op": "accept", "key": "z",
                                                                                      "value": "1"}]
        assert c.post("/v1/ops", json=both, headers=bearer(high["token"])).status_code == 409
        assert c.get("/v1/cells/z", headers=bearer(high["token"])).json()["status"] == "empty"
        # ingest's op ids follow the same rule: a record resent is a duplicate, another credential's is refused
        record = [{"text": "My 5K PB is now 25:50.", "op_id": "run-1"}]
        assert c.post("/v1/ingest", json=record, headers=bearer(high["token"])).status_code == 200
        (resent,) = c.post("/v1/ingest", json=record, headers=bearer(high["token"])).json()["receipts"]
        assert resent["duplicate"] is True
        assert c.post("/v1/ingest", json=record, headers=bearer(low["token"])).status_code == 409
        fresh = c.post("/v1/ops", json=[{**MADRID, "op_id": "a-office-2"}], headers=bearer(high["token"]))
        assert fresh.status_code == 200
        assert c.get("/v1/cells/office", headers=bearer(high["token"])).json()["value"] == "Madrid"


def test_two_credentials_racing_for_one_op_id_never_get_each_others_receipt(tmp_path: Path) -> None:
    """Both send at once: one operation is recorded, the other refused, whoever wins (the log matches the
    resend in its write transaction, where the op id's first use is decided)."""
    db = str(tmp_path / "mem.db")
    tokens = [add_key(db, "team", source=s, max_trust=50)["token"] for s in ("one", "two")]

    def send(n: int, token: str) -> httpx.Response:
        op = {"op": "accept", "key": f"k{n}", "value": token[-6:], "op_id": f"race-{n}"}
        with httpx.Client(base_url=url, params={"namespace": "team"}, headers=bearer(token)) as c:
            return c.post("/v1/ops", json=[op])

    with serving(db) as url, ThreadPoolExecutor(8) as pool:
        for n in range(20):
            answers = list(pool.map(lambda t: send(n, t), tokens))  # noqa: B023  (used before the next n)
            codes = sorted(r.status_code for r in answers)
            assert codes == [200, 409], [r.text for r in answers]
            (won,) = [r.json()[0] for r in answers if r.status_code == 200]
            assert "duplicate" not in won


def test_an_op_id_squatted_by_another_credential_is_refused_over_mcp(tmp_path: Path) -> None:
    db = tmp_path / "mem.db"
    low = add_key(str(db), "a", source="low", max_trust=10)
    high = add_key(str(db), "a", source="agent-a", max_trust=90)

    async def flow() -> None:
        with http_server(db) as url:
            async with http_session(url, low["token"]) as session:
                r = await session.call_tool("apply", {"operations": [SQUAT]})
                assert not r.is_error, text(r)
            async with http_session(url, high["token"]) as session:
                r = await session.call_tool("apply", {"operations": [MADRID]})
                assert r.is_error and "RetryConflict: op_id" in text(r), text(r)
                assert "EVIL" not in text(r) and "low" not in text(r)
                r = await session.call_tool("get", {"key": "office"})
                assert r.structured_content["value"] == "EVIL-SQUAT"  # Madrid was not taken as a resend

    run(flow)


def test_a_tenant_sees_the_global_event_index_and_nothing_else_of_other_namespaces(tmp_path: Path) -> None:
    """The decision kept (docs/server.md): positions are global, so a tenant can count the store's
    events between two of its own; it learns no other namespace's keys, values or sources."""
    db = str(tmp_path / "mem.db")
    a, b = add_key(db, "a", source="sa", max_trust=50), add_key(db, "b", source="sb", max_trust=50)
    with serving(db) as url, httpx.Client(base_url=url) as c:
        c.post("/v1/ops", json=[{"op": "accept", "key": f"secret{i}", "value": "x"} for i in range(3)],
               headers=bearer(a["token"]))
        (mine,) = c.post("/v1/ops", json=[{"op": "accept", "key": "k", "value": "1"}],
                         headers=bearer(b["token"])).json()
        assert mine["event_index"] == 4  # three events of namespace a came before it
        assert c.get("/v1/inspect/summary", headers=bearer(b["token"])).json() == {"namespace": "b",
                                                                                  "last_index": 4}
        assert c.get("/v1/cells/k", params={"as_of": 3}, headers=bearer(b["token"])).json()["status"] == "empty"
        assert c.get("/v1/cells/k", params={"as_of": 4}, headers=bearer(b["token"])).json()["value"] == "1"
        log = c.get("/v1/log", headers=bearer(b["token"])).json()
        assert [e["key"] for e in log] == ["k"]  # the log shows its own events only


def test_stats_name_no_other_namespace_where_a_projection_stopped(tmp_path: Path) -> None:
    from pmem.adapters.readmodels import screening
    from pmem.adapters.service.credentials import Credentials
    from pmem.adapters.service.guarded import GuardedStore

    with pmem_open(tmp_path / "mem.db") as store:
        cred, _ = Credentials(store.projection_db).add(["a"], "sa", 50)
        screening.create_table(store.projection_db)
        for ns in ("a", "b-secret"):
            screening.save(store.projection_db, screening.Stop("graph", ns, 1, "damaged"))
        stopped = GuardedStore(store, cred).stats()["projections"]["graph"]["stopped"]
        assert [s["namespace"] for s in stopped] == ["a"]
        assert len(GuardedStore(store, None).stats()["projections"]["graph"]["stopped"]) == 2
