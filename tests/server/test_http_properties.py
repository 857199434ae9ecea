"""The HTTP API under generated and randomised traffic.

- Property (Hypothesis): valid and invalid inputs on every route, with good, bad, missing and read-only
  tokens: never a 500, and every error is ``{"error", "detail"}``.
- Tenancy: 10,000 randomised requests by two tenants and a read-only key (in process, through the
  ASGI app, for speed), then 500 against a real ``pmem serve``: reads of the other tenant's data,
  writes into it, trust above the cap and writes with the read-only key are counted, and must be 0.
- 503 when the store is unavailable.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import httpx
import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

import pmem
from pmem.adapters.servers.http_api import create_app
from pmem.adapters.service.credentials import Credentials
from tests.conftest import examples
from tests.server.http_servers import bearer, serving

CAPS = {"agent-a": 60, "agent-b": 40, "reader": 10}
OWN = {"agent-a": ("a", "a2"), "agent-b": ("b",), "reader": ("a",)}
MARK = {"agent-a": "A-secret", "agent-b": "B-secret", "reader": "R-secret"}
STATUSES = {200, 400, 401, 403, 404, 405, 409, 413, 422, 503}  # 413, 422: over a limit of the server


@dataclass
class Keys:
    tokens: dict[str, str] = field(default_factory=dict)  # source -> token


def _keys(db: str) -> Keys:
    keys = Keys()
    with pmem.open(db) as store:
        creds = Credentials(store.projection_db)
        for source, cap in CAPS.items():
            keys.tokens[source] = creds.add(list(OWN[source]), source, cap, read_only=source == "reader")[1]
    return keys


@pytest.fixture(scope="module")
def app_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, Keys, str]]:
    db = str(tmp_path_factory.mktemp("props") / "mem.db")
    keys = _keys(db)
    app = create_app(db, settings={"embedder": "hashing", "synchronous": "NORMAL"})
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client, keys, db


# -- property: never a 500 ------------------------------------------------------------------------
params_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
any_int = st.one_of(st.integers(-5, 30), st.integers(), st.sampled_from([2**63 - 1, 2**63, -(2**63)]))
loose = st.one_of(st.none(), any_int, params_text, st.sampled_from(["1", "0", "-1", "1e9", "", "nan"]))
json_leaf = st.one_of(st.none(), st.booleans(), any_int, st.floats(allow_nan=False), st.text(max_size=10))
json_any = st.recursive(json_leaf, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c,
                                                                                         max_size=3), max_leaves=8)
op_dict = st.fixed_dictionaries(
    {"op": st.sampled_from(["accept", "contest", "reject", "revoke", "resolve", "support", "revise", "nope"]),
     "key": st.one_of(st.text(max_size=8), json_leaf)},
    optional={"value": st.one_of(st.text(max_size=8), json_leaf), "trust": json_leaf, "source": json_leaf,
              "namespace": st.sampled_from(["a", "b", "a2", " ", ""]), "op_id": st.text(max_size=4),
              "new_value": st.text(max_size=4), "text": st.text(max_size=8), "observed_at": st.text(max_size=8)})
read_body = st.fixed_dictionaries({}, optional={
    "question": st.one_of(st.text(max_size=20), json_leaf), "mode": st.sampled_from(["cells", "turns", "x", 1]),
    "budget": loose, "as_of": loose, "k": loose, "disclose": st.one_of(st.lists(st.text(max_size=8)), json_leaf),
    "min_trust": loose, "other": json_leaf})
path_key = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=8)


def _q(**params: Any) -> dict[str, Any]:
    return {k: str(v) for k, v in params.items() if v is not None}


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, str, dict[str, Any], Any]:
    route = draw(st.sampled_from(["get", "history", "frontier", "search", "read", "ops", "ingest", "log", "next",
                                  "graph", "stats", "inspect", "unknown"]))
    ns = draw(st.one_of(st.none(), st.sampled_from(["a", "b", "a2", "zz", " "]), params_text))
    common = {"namespace": ns}
    if route in ("get", "history"):
        key = quote(draw(path_key), safe="")
        tail = "/history" if route == "history" else ""
        return "GET", f"/v1/cells/{key}{tail}", _q(**common, as_of=draw(loose), disclose=draw(loose)), None
    if route == "frontier":
        return "GET", "/v1/frontier", _q(**common, as_of=draw(loose), cursor=draw(loose), limit=draw(loose)), None
    if route == "search":
        return "GET", "/v1/search", _q(**common, q=draw(loose), k=draw(loose), as_of=draw(loose)), None
    if route == "read":
        return "POST", "/v1/read", _q(**common), draw(st.one_of(read_body, json_any))
    if route == "ops":
        return "POST", "/v1/ops", _q(**common), draw(st.one_of(st.lists(op_dict, max_size=3), json_any))
    if route == "ingest":
        body = st.lists(st.one_of(st.text(max_size=30), st.dictionaries(st.sampled_from(
            ["text", "trust", "source", "op_id", "node_type", "confidence", "junk"]), json_leaf, max_size=3)),
            max_size=3)
        return "POST", "/v1/ingest", _q(**common), draw(st.one_of(body, json_any))
    if route == "log":
        return "GET", "/v1/log", _q(**common, after=draw(loose), limit=draw(loose)), None
    if route == "next":
        return "GET", "/v1/next", _q(**common, k=draw(loose), previous=draw(loose), as_of=draw(loose)), None
    if route == "graph":
        return "GET", "/v1/graph", _q(**common, format=draw(st.sampled_from(["json", "dot", None])),
                                      as_of=draw(loose)), None
    if route == "stats":
        return "GET", "/v1/stats", _q(**common), None
    if route == "inspect":
        return draw(inspect_requests(common))
    return draw(st.sampled_from(["GET", "POST", "DELETE"])), "/v1/" + quote(draw(path_key), safe=""), {}, None


def inspect_requests(common: dict[str, Any]) -> st.SearchStrategy[tuple[str, str, dict[str, Any], Any]]:
    """The memory inspector's routes (adapters/servers/http_inspect.py)."""
    key = path_key.map(lambda k: quote(k, safe=""))
    return st.one_of(
        st.just(("GET", "/v1/inspect/summary", _q(**common), None)),
        st.builds(lambda k, a: ("GET", f"/v1/inspect/cells/{k}/events", _q(**common, as_of=a), None), key, loose),
        st.builds(lambda a, b, n: ("GET", "/v1/inspect/changes", _q(**common, since=a, until=b, limit=n), None),
                  loose, loose, loose),
        st.builds(lambda a, c, n, t, cur, lim: ("GET", "/v1/inspect/frontier", _q(
            **common, as_of=a, contested=c, since=n, node_type=t, cursor=cur, limit=lim), None),
            loose, st.one_of(loose, st.sampled_from(["true", "1"])), loose,
            st.one_of(loose, st.sampled_from(["event", "persona", "relationship"])), loose, loose),
        st.builds(lambda o, a, d: ("GET", "/v1/inspect/neighbourhood", _q(**common, of=o, as_of=a, depth=d), None),
                  loose, loose, loose))


def test_no_input_gets_a_500(app_client: tuple[TestClient, Keys, str]) -> None:
    client, keys, _ = app_client
    seen: dict[int, int] = {}

    @settings(max_examples=examples(700))
    @given(requests(), st.sampled_from([*keys.tokens, None, "junk"]))
    def check(request: tuple[str, str, dict[str, Any], Any], who: str | None) -> None:
        method, path, params, body = request
        token = keys.tokens.get(who or "", "pmem_0123456789ab_junk" if who == "junk" else None)
        headers = {"Content-Type": "application/json", **(bearer(token) if token else {})}
        content = None if body is None else json.dumps(body).encode()  # ASCII: lone surrogates as escapes
        r = client.request(method, path, params=params, content=content, headers=headers)
        seen[r.status_code] = seen.get(r.status_code, 0) + 1
        assert r.status_code in STATUSES, (method, path, params, body, r.status_code, r.text)
        if r.status_code >= 400:
            assert {"error", "detail"} <= set(r.json()) <= {"error", "detail", "field", "line"}, r.text

    check()
    assert seen.get(500, 0) == 0
    assert {200, 400, 401, 403} <= set(seen), seen  # the generator reaches success and each kind of refusal


# -- tenancy --------------------------------------------------------------------------------------
@dataclass
class Tally:
    cross_reads: int = 0
    cross_writes: int = 0
    over_cap: int = 0
    read_only_writes: int = 0
    requests: int = 0
    ok: int = 0


def _random_request(rng: random.Random, who: str, n: int) -> tuple[str, str, dict[str, Any], Any]:
    others = [ns for s, own in OWN.items() if s != who for ns in own]
    ns = rng.choice([None, *OWN[who], *others])
    params = {} if ns is None else {"namespace": ns}
    kind = rng.random()
    if kind < 0.35:
        ops = []
        for _ in range(rng.randint(1, 3)):
            op: dict[str, Any] = {"op": rng.choice(["accept", "contest", "support"]), "key": f"k{rng.randint(0, 40)}",
                                  "value": f"{MARK[who]}-{n}"}
            if rng.random() < 0.7:
                op["trust"] = rng.randint(0, 100)
            if rng.random() < 0.3:
                op["source"] = rng.choice(list(CAPS))
            if rng.random() < 0.2:
                op["namespace"] = rng.choice([*OWN[who], *others])
            ops.append(op)
        return "POST", "/v1/ops", params, ops
    if kind < 0.38:
        return "POST", "/v1/ingest", params, [{"text": f"My code word is now {MARK[who]}-{n}.",
                                               "trust": rng.randint(0, 100)}]
    key = f"k{rng.randint(0, 40)}"
    if kind < 0.42:  # search and read embed the question: the dearest reads, so fewer of them
        return rng.choice([("GET", "/v1/search", {**params, "q": f"{key} {MARK[rng.choice(list(MARK))]}"}, None),
                           ("POST", "/v1/read", params, {"question": f"what is {key}?"})])
    return rng.choice([
        ("GET", f"/v1/cells/{key}", {**params, "disclose": "history,alternatives,support"}, None),
        ("GET", f"/v1/cells/{key}/history", params, None),
        ("GET", "/v1/frontier", {**params, "limit": 50}, None),
        ("GET", "/v1/log", {**params, "after": rng.randint(0, 2000), "limit": 50}, None),
        ("GET", f"/v1/inspect/cells/{key}/events", params, None),
        ("GET", "/v1/inspect/changes", {**params, "since": rng.randint(0, 2000)}, None),
        ("GET", "/v1/inspect/frontier", {**params, "since": rng.randint(0, 2000), "limit": 50}, None),
        ("GET", "/v1/inspect/neighbourhood", {**params, "of": key}, None),
    ])


def _requests(rng: random.Random, count: int) -> Iterator[tuple[str, str, str, dict[str, Any], Any]]:
    for n in range(count):
        who = rng.choice(list(CAPS))
        yield (who, *_random_request(rng, who, n))


def _count(tally: Tally, who: str, method: str, path: str, r: httpx.Response) -> None:
    """Count one answer: a 200 that shows another tenant's data, or a write accepted from the read-only key."""
    tally.requests += 1
    assert r.status_code in (200, 400, 403), r.text
    if r.status_code != 200:
        return
    tally.ok += 1
    foreign = [MARK[s] for s in CAPS if not set(OWN[s]) & set(OWN[who])]
    tally.cross_reads += any(m in r.text for m in foreign)
    if method == "POST" and path != "/v1/read":
        tally.read_only_writes += who == "reader"


def _audit_log(db: str, tally: Tally) -> int:
    """Count, over every namespace's log, writes into another tenant's namespace and trust above the cap."""
    events = 0
    with pmem.open(db) as store:
        for ns in ("a", "a2", "b"):
            for e in store.log(namespace=ns):
                events += 1
                source = e.get("source")
                tally.cross_writes += ns not in OWN.get(source, ())
                tally.over_cap += e.get("trust", 0) > CAPS.get(source, -1)
                tally.read_only_writes += source == "reader"
    return events


# Slow: ten thousand requests against a real server process.
@pytest.mark.slow
def test_ten_thousand_requests_by_two_tenants_cross_nothing(tmp_path: Path) -> None:
    db = str(tmp_path / "mem.db")
    keys = _keys(db)
    tally = Tally()
    app = create_app(db, settings={"embedder": "hashing", "synchronous": "NORMAL"})
    app.state.runtime.open()  # what the lifespan does (the in-process transport does not run it)

    async def drive() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://pmem") as client:
            for who, method, path, params, body in _requests(random.Random(14), 10_000):
                r = await client.request(method, path, params=params, json=body, headers=bearer(keys.tokens[who]))
                _count(tally, who, method, path, r)

    try:
        anyio.run(drive)
    finally:
        app.state.runtime.close()
    events = _audit_log(db, tally)
    assert tally.requests == 10_000 and tally.ok > 3_000 and events > 1_000, (tally, events)
    assert (tally.cross_reads, tally.cross_writes, tally.over_cap, tally.read_only_writes) == (0, 0, 0, 0), tally


def test_tenancy_holds_against_a_real_server(tmp_path: Path) -> None:
    db = str(tmp_path / "mem.db")
    keys = _keys(db)
    tally = Tally()
    with serving(db) as url, httpx.Client(base_url=url, timeout=60) as client:
        for who, method, path, params, body in _requests(random.Random(15), 500):
            _count(tally, who, method, path, client.request(method, path, params=params, json=body,
                                                            headers=bearer(keys.tokens[who])))
    events = _audit_log(db, tally)
    assert tally.ok > 150 and events > 50, (tally, events)
    assert (tally.cross_reads, tally.cross_writes, tally.over_cap, tally.read_only_writes) == (0, 0, 0, 0), tally


def test_an_unavailable_store_is_503(tmp_path: Path) -> None:
    db = str(tmp_path / "mem.db")
    keys = _keys(db)
    app = create_app(db, settings={"embedder": "hashing"})
    with TestClient(app, raise_server_exceptions=False) as client:
        assert client.get("/v1/stats", headers=bearer(keys.tokens["agent-a"])).status_code == 200
        app.state.runtime.store.close()  # as when the database has gone away under the process
        r = client.get("/v1/cells/k", headers=bearer(keys.tokens["agent-a"]))
        assert r.status_code == 503 and set(r.json()) == {"error", "detail"}, r.text
