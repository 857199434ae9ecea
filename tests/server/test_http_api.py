"""``pmem serve`` as a real process driven by a real HTTP client (httpx): every route, the credential
rules (namespaces, source, trust cap, read-only), the error statuses, revocation across two server
processes on one store, and the ``--insecure-local`` rules."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from pmem.domain.op_schema import operations_schema
from tests.conftest import PMEM_BIN
from tests.server.http_servers import EMBEDDER, add_key, bearer, free_port, pmem, serving


@dataclass
class Served:
    db: str
    url: str
    a: dict[str, Any]  # tenant A: namespaces a and a2, source agent-a, max trust 60
    b: dict[str, Any]  # tenant B: namespace b, source agent-b, max trust 40
    reader: dict[str, Any]  # read-only on a

    def client(self, key: dict[str, Any] | None) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=bearer(key["token"]) if key else {}, timeout=60)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    db = str(tmp_path_factory.mktemp("http") / "mem.db")
    a = add_key(db, "a", "a2", source="agent-a", max_trust=60)
    b = add_key(db, "b", source="agent-b", max_trust=40)
    reader = add_key(db, "a", source="reader", max_trust=10, read_only=True)
    with serving(db) as url:
        yield Served(db, url, a, b, reader)


def test_keys_list_shows_every_key_without_tokens(served: Served) -> None:
    out = pmem(served.db, "keys", "list")
    assert out.returncode == 0, out.stderr
    assert served.a["token"] not in out.stdout and "hash" not in out.stdout
    rows = [httpx.Response(200, content=line).json() for line in out.stdout.splitlines()]
    assert {r["key_id"]: (r["namespaces"], r["source"], r["max_trust"], r["read_only"]) for r in rows} == {
        served.a["key_id"]: (["a", "a2"], "agent-a", 60, False), served.b["key_id"]: (["b"], "agent-b", 40, False),
        served.reader["key_id"]: (["a"], "reader", 10, True)}


def test_writes_take_source_and_capped_trust_from_the_credential(served: Served) -> None:
    with served.client(served.a) as c:
        r = c.post("/v1/ops", json=[{"op": "accept", "key": "home", "value": "Paris", "trust": 95, "source": "x"},
                                    {"op": "accept", "key": "work", "value": "ACME", "trust": 30},
                                    {"op": "accept", "key": "pet", "value": "cat"}])
        assert r.status_code == 200, r.text
        first, second, third = r.json()
        assert first["trust_capped"] == {"claimed": 95, "applied": 60}
        assert first["source_set"] == {"claimed": "x", "applied": "agent-a"}
        assert "trust_capped" not in second and "source_set" not in second and first["namespace"] == "a"
        cells = {k: c.get(f"/v1/cells/{k}", params={"disclose": "support"}).json() for k in ("home", "work", "pet")}
        assert {k: (v["value"], v["support"]["trust"], v["support"]["sources"]) for k, v in cells.items()} == {
            "home": ("Paris", 60, ["agent-a"]), "work": ("ACME", 30, ["agent-a"]), "pet": ("cat", 60, ["agent-a"])}
        assert third["applied"] is True


def test_every_read_route_answers_the_cli_shapes(served: Served) -> None:
    with served.client(served.a) as c:
        c.post("/v1/ops", params={"namespace": "a2"},
               json=[{"op": "accept", "key": f"k{i}", "value": f"v{i}"} for i in range(5)]).raise_for_status()
        ns = {"namespace": "a2"}
        assert c.get("/v1/cells/k1", params=ns).json()["value"] == "v1"
        hist = c.get("/v1/cells/k1/history", params=ns).json()
        assert hist["key"] == "k1" and hist["versions"][0]["sources"] == ["agent-a"]
        keys, cursor = [], None
        while True:  # the frontier, two cells a page
            page = c.get("/v1/frontier", params={**ns, "limit": 2, **({"cursor": cursor} if cursor else {})}).json()
            keys += [cell["key"] for cell in page["cells"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert keys == [f"k{i}" for i in range(5)]
        hits = c.get("/v1/search", params={**ns, "q": "k3: v3", "k": 2}).json()
        assert len(hits) == 2 and all(h["namespace"] == "a2" for h in hits) and "score" in hits[0]
        read = c.post("/v1/read", params=ns, json={"question": "what is k2?", "budget": 100}).json()
        assert "k2 = v2" in read["context"] and read["mode"] == "cells"
        dated = c.post("/v1/read", params=ns, json={"question": "what is k2?", "k": 1, "dated": True}).json()
        assert re.fullmatch(r"\[\d{1,2} [A-Z][a-z]+ \d{4}\] k\d = v\d", dated["context"]), dated
        log = c.get("/v1/log", params={**ns, "limit": 3}).json()
        assert [e["key"] for e in log] == ["k0", "k1", "k2"] and all(e["source"] == "agent-a" for e in log)
        assert c.get("/v1/log", params={**ns, "after": log[-1]["event_index"]}).json()[0]["key"] == "k3"
        assert isinstance(c.get("/v1/next", params=ns).json(), list)
        graph = c.get("/v1/graph", params={**ns, "format": "json"}).json()
        assert {"k1", "v1"} <= {n["id"] for n in graph["nodes"]}
        assert c.get("/v1/stats").json()["events"] >= 5
        old = c.get("/v1/cells/k1", params={**ns, "as_of": 0}).json()
        assert old["status"] == "empty"  # as_of before anything was written


def test_ingest_goes_through_the_same_rules(served: Served) -> None:
    with served.client(served.b) as c:
        r = c.post("/v1/ingest", json=["My favourite colour is now green.",
                                       {"text": "My favourite food is now soup.", "trust": 90, "source": "me"}])
        assert r.status_code == 200, r.text
        receipts = r.json()["receipts"]
        assert [x["applied"] for x in receipts] == [True, True], receipts
        assert "trust_capped" not in receipts[0] and receipts[1]["trust_capped"] == {"claimed": 90, "applied": 40}
        events = c.get("/v1/log").json()
        assert events and all(e["source"] == "agent-b" and e["trust"] <= 40 and e["namespace"] == "b" for e in events)


def without_null_defaults(schema: Any) -> Any:
    """``schema`` as FastAPI's OpenAPI writes it: without ``"default": null`` (an absent field is null)."""
    if isinstance(schema, dict):
        return {k: without_null_defaults(v) for k, v in schema.items() if not (k == "default" and v is None)}
    return [without_null_defaults(v) for v in schema] if isinstance(schema, list) else schema


def test_auth_errors(served: Served) -> None:
    with served.client(None) as anon:
        r = anon.get("/v1/cells/home")
        assert r.status_code == 401 and r.json()["error"] == "unauthorized"
        assert r.headers["www-authenticate"] == "Bearer"
        assert anon.get("/v1/cells/home", headers={"Authorization": "Bearer pmem_0123456789ab_nope"}).status_code == 401
        assert anon.get("/v1/cells/home", headers={"Authorization": "Basic abc"}).status_code == 401
        assert anon.get("/healthz").json() == {"status": "ok"}
        ops = anon.get("/openapi.json").json()["paths"]["/v1/ops"]["post"]["requestBody"]["content"]
        body = ops["application/json"]["schema"]
        assert body.pop("title") == "Body"  # FastAPI's title for the body; the rest is the structs' own schema
        assert body == without_null_defaults(operations_schema())
    with served.client(served.b) as c:
        for r in (c.get("/v1/cells/home", params={"namespace": "a"}), c.get("/v1/log", params={"namespace": "a"}),
                  c.post("/v1/ops", json=[{"op": "accept", "key": "x", "value": "1", "namespace": "a"}]),
                  c.post("/v1/ops", params={"namespace": "a"}, json=[{"op": "accept", "key": "x", "value": "1"}])):
            assert r.status_code == 403 and r.json()["error"] == "forbidden", r.text
    with served.client(served.a) as c:  # this test's own cell: a worker may run it before any other test
        c.post("/v1/ops", json=[{"op": "accept", "key": "read-only-home", "value": "Paris"}]).raise_for_status()
    with served.client(served.reader) as c:
        assert c.get("/v1/cells/read-only-home").json()["value"] == "Paris"
        for r in (c.post("/v1/ops", json=[{"op": "accept", "key": "read-only-home", "value": "Rome"}]),
                  c.post("/v1/ingest", json=["My name is Eve."])):
            assert r.status_code == 403 and "read-only" in r.json()["detail"]
        assert c.get("/v1/cells/read-only-home").json()["value"] == "Paris"


def test_bad_input_is_400_and_unknown_routes_404(served: Served) -> None:
    with served.client(served.a) as c:
        for r in (c.get("/v1/cells/home", params={"as_of": -1}), c.get("/v1/search"),
                  c.get("/v1/search", params={"q": "x", "k": "many"}),
                  c.post("/v1/ops", json={"op": "accept"}), c.post("/v1/ops", content=b"[{"),
                  c.post("/v1/ops", json=[{"op": "accept", "key": "x"}]),
                  c.post("/v1/read", json={"question": "q", "nonsense": 1}),
                  c.get("/v1/graph", params={"format": "dot"}), c.get("/v1/cells/x", params={"namespace": " "})):
            assert r.status_code == 400, (r.request.url, r.text)
            assert {"error", "detail"} <= set(r.json()) <= {"error", "detail", "field", "line"}
        bad = c.post("/v1/ops", json=[{"op": "accept", "key": "ok", "value": "1"}, {"op": "nope", "key": "k"}])
        assert bad.status_code == 400 and bad.json()["detail"].startswith("line 2:")
        assert (bad.json()["line"], bad.json()["field"]) == (2, "op")  # what a client rebuilds the error from
        assert c.get("/v1/cells/ok").json()["status"] == "empty"  # nothing of the batch was written
        r = c.get("/v1/nothing")
        assert r.status_code == 404 and r.json() == {"error": "not found", "detail": "no route GET /v1/nothing"}


def test_an_op_id_resent_with_another_operation_is_409(served: Served) -> None:
    with served.client(served.a) as c:
        op = {"op": "accept", "key": "retry", "value": "1", "op_id": "req-1"}
        first = c.post("/v1/ops", json=[op]).json()[0]
        again = c.post("/v1/ops", json=[op]).json()[0]
        assert again["duplicate"] is True and again["event_index"] == first["event_index"]
        r = c.post("/v1/ops", json=[{"op": "accept", "key": "other", "value": "2"},
                                    {**op, "key": "elsewhere"}])
        assert r.status_code == 409 and r.json()["error"] == "conflict", r.text
        assert c.get("/v1/cells/other").json()["status"] == "empty"  # nothing of that batch was written


@pytest.mark.slow  # three server processes (the full suite runs it)
def test_revocation_stops_the_token_in_every_server_process(tmp_path: Path) -> None:
    db = str(tmp_path / "mem.db")
    key = add_key(db, "ns", source="s", max_trust=50)
    with serving(db) as one, serving(db, "--workers", "2") as two:  # three processes: one, and two workers
        for url in (one, two):
            assert httpx.get(f"{url}/v1/stats", headers=bearer(key["token"])).status_code == 200
        out = pmem(db, "keys", "revoke", key["key_id"])
        assert out.returncode == 0 and '"revoked_at":"' in out.stdout, out.stderr
        for url in (one, two, two, two):  # the next request in each process (three to the workers)
            r = httpx.get(f"{url}/v1/stats", headers=bearer(key["token"]))
            assert r.status_code == 401 and "revoked" in r.json()["detail"]
    audit = pmem(db, "keys", "list")
    assert '"revoked_at":null' not in audit.stdout


def test_insecure_local_rules(tmp_path: Path) -> None:
    db = str(tmp_path / "mem.db")

    def serve(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([PMEM_BIN, "--db", db, *EMBEDDER, "serve", "--port", str(free_port()), *args],
                              capture_output=True, text=True, timeout=60)

    refused = serve()
    assert refused.returncode == 2 and "no active credential" in refused.stderr
    assert refused.stderr.count("\n") == 1
    wide = serve("--insecure-local", "--host", "0.0.0.0")
    assert wide.returncode == 2 and "binds only 127.0.0.1" in wide.stderr
    with serving(db, "--insecure-local") as url:
        r = httpx.post(f"{url}/v1/ops", json=[{"op": "accept", "key": "k", "value": "v", "trust": 100}])
        assert r.status_code == 200 and "trust_capped" not in r.json()[0]  # no credential, no rewriting
        assert httpx.get(f"{url}/v1/cells/k").json()["value"] == "v"
    add_key(db, "ns", source="s", max_trust=50)
    keyed = serve("--insecure-local")
    assert keyed.returncode == 2 and "active credentials" in keyed.stderr
