"""The memory inspector's routes (``/v1/inspect/...``) and its page at ``/ui``, through the real app (FastAPI's
test client over a real SQLite store built by the demo's operations): answers, and the credential's rules."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import pmem
from pmem.adapters.servers.http_api import create_app
from pmem.adapters.service.credentials import Credentials
from tests.browser.demo_store import DemoStore, build
from tests.server.http_servers import bearer


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, DemoStore, dict[str, str]]]:
    demo = build(str(tmp_path_factory.mktemp("inspect") / "demo.db"))
    with pmem.open(demo.db) as store:
        creds = Credentials(store.projection_db)
        tokens = {"reader": creds.add(["default"], "inspector", 0, read_only=True)[1],
                  "other": creds.add(["elsewhere"], "other", 50)[1]}
    app = create_app(demo.db, settings={"embedder": "hashing"})
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client, demo, tokens


def get(served: tuple[TestClient, DemoStore, dict[str, str]], path: str, who: str = "reader",
        **params: Any) -> Any:
    client, _, tokens = served
    r = client.get(path, params=params, headers=bearer(tokens[who]))
    assert r.status_code == 200, r.text
    return r.json()


def test_a_cells_events_say_what_was_requested_applied_and_why(served: Any) -> None:
    demo: DemoStore = served[1]
    out = get(served, "/v1/inspect/cells/budget/events")
    assert [(e["event_index"], e["requested"], e["op"], e["value"]) for e in out["events"]] == [
        (demo.raised_at - 1, "accept", "accept", "$30k"), (demo.raised_at, "accept", "accept", "$50k"),
        (demo.raised_at + 1, "revoke", "revoke", "$50k")]
    assert out["events"][-1]["text"] == "scratch that, the raise is off"
    assert len(get(served, "/v1/inspect/cells/budget/events", as_of=demo.raised_at)["events"]) == 2
    payee = get(served, "/v1/inspect/cells/payee account/events")["events"]  # the poisoning scene
    lowered = [e for e in payee if e["requested"] != e["op"]]
    assert lowered and all(e.get("reason") for e in lowered)


def test_changes_between_two_events_list_heads_that_differ(served: Any) -> None:
    demo: DemoStore = served[1]
    out = get(served, "/v1/inspect/changes", since=demo.raised_at, until=demo.contested_at)
    assert out["cells"] == [
        {"key": "budget", "before": {"value": "$50k", "status": "active"},
         "after": {"value": "$30k", "status": "active"}},
        {"key": "meeting_room", "before": None, "after": {"value": "Room A", "status": "contested"}}]
    assert get(served, "/v1/inspect/changes", since=demo.last)["count"] == 0


def test_the_frontier_filters(served: Any) -> None:
    demo: DemoStore = served[1]
    keys = lambda **q: [c["key"] for c in get(served, "/v1/inspect/frontier", **q)["cells"]]  # noqa: E731
    assert keys(contested="true", as_of=demo.contested_at) == ["meeting_room"]
    assert keys(contested="true") == ["charles_dickens.spouse"]
    assert "budget" not in keys(since=demo.raised_at + 1) and "meeting_room" in keys(since=demo.raised_at + 1)
    assert keys(node_type="relationship") and set(keys(node_type="relationship")) < set(keys())
    page = get(served, "/v1/inspect/frontier", limit=2)
    assert len(page["cells"]) == 2 and page["next_cursor"] == page["cells"][1]["key"]


def test_the_neighbourhood_of_a_cell_and_of_an_entity(served: Any) -> None:
    out = get(served, "/v1/inspect/neighbourhood", of="our_mutual_friend.author")
    assert out["start"] == ["charles_dickens", "our_mutual_friend"]
    nodes = {n["id"]: n for n in out["nodes"]}
    assert nodes["charles_dickens"]["cells"] == ["charles_dickens.place_of_birth", "charles_dickens.spouse"]
    assert nodes["charles_dickens"]["contested"] == ["charles_dickens.spouse"]
    assert "london" not in nodes and {"src": "our_mutual_friend", "dst": "charles_dickens",
                                      "kind": "prerequisite"} in out["edges"]
    far = get(served, "/v1/inspect/neighbourhood", of="portsmouth", depth=3)
    assert {n["id"]: n["hops"] for n in far["nodes"]}["london"] == 2
    assert get(served, "/v1/inspect/neighbourhood", of="nobody")["nodes"] == []


def test_what_next_beside_the_graph_is_the_apis_ranking_at_every_event_index(served: Any) -> None:
    demo: DemoStore = served[1]
    for as_of in (None, demo.contested_at):
        want = get(served, "/v1/next", k=5, **({} if as_of is None else {"as_of": as_of}))
        got = get(served, "/v1/inspect/next", k=5, **({} if as_of is None else {"as_of": as_of}))
        assert got == want and got, as_of
    assert get(served, "/v1/inspect/next", k=2) == get(served, "/v1/next", k=2)  # the stored ranking, cut to k
    assert get(served, "/v1/inspect/next", as_of=10**9) == get(served, "/v1/next", k=5)  # past the end: now


def test_the_credentials_rules_hold_on_every_inspect_route(served: Any) -> None:
    client, _, tokens = served
    paths = ["/v1/inspect/summary", "/v1/inspect/cells/budget/events", "/v1/inspect/changes?since=0",
             "/v1/inspect/frontier", "/v1/inspect/neighbourhood?of=budget", "/v1/inspect/next"]
    for path in paths:
        assert client.get(path).status_code == 401
        assert client.get(path, headers=bearer("pmem_0123456789ab_wrong")).status_code == 401
        named = f"{path}{'&' if '?' in path else '?'}namespace=default"
        assert client.get(named, headers=bearer(tokens["other"])).status_code == 403
        other = client.get(path, headers=bearer(tokens["other"]))  # its own namespace: empty, not the default's
        assert other.status_code == 200 and "$30k" not in other.text
    assert get(served, "/v1/inspect/summary") == {"namespace": "default", "last_index": served[1].last}


def test_bad_parameters_are_400_naming_them(served: Any) -> None:
    client, _, tokens = served
    for path, name in (("/v1/inspect/neighbourhood?of=budget&depth=9", "depth"),
                       ("/v1/inspect/frontier?node_type=robot", "node_type"), ("/v1/inspect/changes", "since"),
                       ("/v1/inspect/next?k=51", "k")):
        r = client.get(path, headers=bearer(tokens["reader"]))
        assert r.status_code == 400 and name in r.json()["detail"], r.text


def test_every_ui_path_answers_the_page_and_its_assets_ship_in_the_package(served: Any, tmp_path: Path) -> None:
    client = served[0]
    for path in ("/ui/", "/ui/cell/budget", "/ui/graph/x.y?as_of=3", "/ui/changes?since=1"):
        r = client.get(path)
        assert r.status_code == 200 and r.text.startswith("<!doctype html>"), path
        assert "default-src 'none'" in r.headers["content-security-policy"]
    assert client.get("/ui", follow_redirects=False).headers["location"] == "/ui/"
    for name, kind in (("inspector.js", "text/javascript"), ("inspector.css", "text/css")):
        r = client.get(f"/ui/assets/{name}")
        assert r.status_code == 200 and r.headers["content-type"].startswith(kind) and len(r.content) > 1000
        assert "http://" not in r.text.replace("http://www.w3.org/2000/svg", "") and "https://" not in r.text
    assert client.get("/ui/assets/nothing.js").status_code == 404
    schema = client.get("/openapi.json").json()["paths"]
    assert not [p for p in schema if p.startswith("/ui")]
    assert {"/v1/inspect/summary", "/v1/inspect/changes", "/v1/inspect/frontier", "/v1/inspect/neighbourhood",
            "/v1/inspect/cells/{key}/events", "/v1/inspect/next"} <= set(schema)


def test_the_inspection_reads_the_same_on_both_backends(db: str) -> None:
    """``GuardedStore.inspection`` over SQLite and PostgreSQL (the routes above run on SQLite)."""
    from pmem.adapters.service.guarded import GuardedStore

    demo = build(db)
    with pmem.open(db, embedder="hashing") as store:
        inspect = GuardedStore(store, None).inspection("default")
        events = inspect.cell_events("meeting room", as_of=demo.contested_at)["events"]
        assert [(e["requested"], e["value"], e["trust"]) for e in events] == [("accept", "Room A", 70),
                                                                           ("contest", "Room B", 70)]
        changed = inspect.changes(demo.raised_at, demo.contested_at)["cells"]
        assert [c["key"] for c in changed] == ["budget", "meeting_room"]
        assert [c["key"] for c in inspect.frontier(demo.contested_at, contested=True)["cells"]] == ["meeting_room"]
        hood = inspect.neighbourhood("charles_dickens.spouse")
        assert {n["id"] for n in hood["nodes"]} >= {"charles_dickens", "catherine_dickens"}
