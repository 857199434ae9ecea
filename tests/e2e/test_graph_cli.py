"""``pmem next``, ``pmem require`` and ``pmem graph export`` as a user runs them; the HTML view in Chromium is in
tests/browser/test_graph_view.py."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from tests.e2e.test_cli import error, ok, pmem

FACTS = [
    {"op": "accept", "key": "our_mutual_friend.author", "value": "Charles Darwin", "source": "wiki"},
    {"op": "accept", "key": "our_mutual_friend.author", "value": "Charles Dickens", "source": "library"},
    {"op": "accept", "key": "charles_dickens.spouse", "value": "Catherine Dickens"},
    {"op": "contest", "key": "charles_dickens.spouse", "value": "Ellen Ternan", "source": "gossip"},
    {"op": "accept", "key": "catherine_dickens.country_of_citizenship", "value": "United Kingdom"},
    {"op": "accept", "key": "great_expectations.author", "value": "Charles Dickens"},
]


def write(db: str) -> None:
    ok(db, "apply", "-", stdin=b"".join(json.dumps(d).encode() + b"\n" for d in FACTS))


def test_next_proposes_unconfirmed_entities_whose_prerequisites_are_known(db: str) -> None:
    write(db)
    proposals = ok(db, "next", "--k", "10")
    names = [p["entity"] for p in proposals]
    # charles_dickens: a contested fact; united_kingdom: named, nothing known, its prerequisite
    # catherine_dickens confirmed. Confirmed entities and superseded values are not proposed.
    assert sorted(names) == ["charles_dickens", "united_kingdom"]
    assert all(p["score"] >= q["score"] for p, q in zip(proposals, proposals[1:], strict=False))
    assert {"entity", "text", "type", "score", "gap", "requires"} <= set(proposals[0])


def test_a_declared_prerequisite_holds_a_candidate_back_until_it_is_known(db: str) -> None:
    write(db)
    assert "ellen_ternan" not in [p["entity"] for p in ok(db, "next", "--k", "50")]
    (r,) = ok(db, "require", "visa.status", "trip.date")
    assert r["applied"] and r["key"].startswith("requires.")
    names = [p["entity"] for p in ok(db, "next", "--k", "50")]
    assert "visa" in names and "trip" not in names
    ok(db, "accept", "visa.status", "granted")
    names = [p["entity"] for p in ok(db, "next", "--k", "50")]
    assert "trip" in names and "visa" not in names


def test_export_of_a_key_shows_its_versions_evidence_and_edges(db: str) -> None:
    write(db)
    (g,) = ok(db, "graph", "export", "--key", "our_mutual_friend.author")
    labels = {n["label"] for n in g["nodes"]}
    assert {"Charles Darwin (superseded)", "Charles Dickens (active)"} <= labels
    assert {"src": "v1", "dst": "v0", "kind": "supersedes"} in g["edges"]
    assert any(e["kind"] == "supported-by" for e in g["edges"])
    dot = pmem(db, "graph", "export", "--format", "dot").stdout.decode()
    assert dot.startswith('digraph "entity graph"') and '"our_mutual_friend" -> "charles_dickens"' in dot


def test_export_as_of_an_earlier_index_shows_the_graph_of_that_moment(db: str) -> None:
    write(db)
    (g,) = ok(db, "graph", "export", "--as-of", "1")
    assert {n["id"] for n in g["nodes"]} == {"our_mutual_friend", "charles_darwin"}


def test_bad_graph_input_is_a_one_line_json_error(db: str) -> None:
    write(db)
    r = pmem(db, "graph", "export", "--key", "nobody.home")
    assert r.returncode == 2 and "no cell 'nobody.home'" in error(r)["detail"]
    r = pmem(db, "next", "--k", "0")
    assert r.returncode == 2 and error(r)["error"] == "usage"
    r = pmem(db, "graph", "export", "--format", "svg")
    assert r.returncode == 2 and "--format" in error(r)["detail"]


def test_a_node_type_is_set_from_the_cli_or_a_json_op_and_a_bad_one_is_a_one_line_error(db: str) -> None:
    ok(db, "accept", "ada.nickname", "Enchantress", "--node-type", "event")
    ok(db, "apply", "-", stdin=b'{"op": "accept", "key": "bob.nickname", "value": "Bobby", '
                                    b'"node_type": "relationship"}\n')
    ok(db, "accept", "cy.nickname", "Cyrus")
    (g,) = ok(db, "graph", "export")
    kinds = {n["id"]: n["kind"] for n in g["nodes"]}
    assert (kinds["ada"], kinds["bob"], kinds["cy"]) == ("event", "relationship", "persona")  # cy: by rule
    r = pmem(db, "accept", "dan.nickname", "Danny", "--node-type", "hobby")
    assert r.returncode == 2 and "'node_type' must be one of event, persona, relationship" in error(r)["detail"]
    r = pmem(db, "apply", "-", stdin=b'{"op": "accept", "key": "k", "value": "v", "node_type": "x"}\n')
    assert r.returncode == 2 and "line 1" in error(r)["detail"] and "node_type" in error(r)["detail"]
    r = pmem(db, "check", "ed.nickname", "Eddie", "--node-type", "event")
    assert r.returncode == 2 and "--write" in error(r)["detail"]
    (w,) = ok(db, "check", "ed.nickname", "Eddie", "--node-type", "event", "--write")
    assert w["applied"] and len(ok(db, "log")) == 4


def html_page(db: str, tmp: Path) -> Path:
    page = tmp / "graph.html"
    page.write_bytes(pmem(db, "graph", "export", "--format", "html").stdout)
    return page


def test_the_html_view_is_one_self_contained_page(db: str, tmp_path: Path) -> None:
    write(db)
    text = html_page(db, tmp_path).read_text()
    assert text.startswith("<!doctype html>") and "<svg" in text and "charles dickens" in text.lower()
    assert "<script" not in text and "<link" not in text and "@import" not in text
    assert re.findall(r"https?://[^\"']+", text) == ["http://www.w3.org/2000/svg"]  # a namespace, not a fetch


def test_check_reports_conflicts_and_write_contests_below_confidence_0_6(db: str) -> None:
    ok(db, "accept", "user.diet", "vegan")
    (c,) = ok(db, "check", "user.diet", "not vegan")
    assert c["contest"] and [x["kind"] for x in c["conflicts"]] == ["semantic"]
    (r,) = ok(db, "check", "user.diet", "not vegan", "--write", "--source", "chat")
    assert r["op"] == "contest" and r["head"] == {"value": "vegan", "status": "contested"}
    (r,) = ok(db, "check", "user.diet", "vegetarian", "--write")
    assert r["op"] == "accept" and r["check"]["conflicts"] == []


def test_check_rejects_a_malformed_exclusion_naming_it(db: str) -> None:
    r = pmem(db, "check", "a", "b", "--exclusive", "junk")
    assert r.returncode == 2 and "--exclusive expects KEY=VALUE,KEY=VALUE, got 'junk'" in error(r)["detail"]


def test_rebuild_of_the_graph_projection_replays_the_log_and_exports_the_same_graph(db: str) -> None:
    write(db)
    before = ok(db, "graph", "export")
    (r,) = ok(db, "rebuild", "--projection", "graph")
    assert r["events"] == len(FACTS)
    assert ok(db, "graph", "export") == before
    assert ok(db, "stats")[0]["projections"]["graph"] == {"position": len(FACTS), "lag": 0}


def test_the_html_view_of_a_graph_past_the_spring_layouts_limit_needs_no_scipy(db_path: Path, tmp_path: Path) -> None:
    """From 500 nodes networkx's spring layout needs scipy (not a P-Mem dependency; a 2,000-fact store
    exited 70 with "No module named 'scipy'"): the export lays such a graph out on rings with numpy alone.
    scipy is made unimportable in the CLI's process, so the test holds where scipy happens to be installed."""
    blocked = tmp_path / "no_scipy" / "scipy"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'scipy'\", name='scipy')\n")
    env = {**os.environ, "PYTHONPATH": str(blocked.parent)}
    ops = [{"op": "accept", "key": f"reader_{i:03d}.favourite_book", "value": f"Book {i % 280:03d}"}
           for i in range(300)]  # 300 readers and 280 books: 580 entities
    ok(db_path, "apply", "-", stdin=b"".join(json.dumps(d).encode() + b"\n" for d in ops))
    r = pmem(db_path, "graph", "export", "--format", "html", env=env)
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    text = r.stdout.decode()
    (count,) = re.findall(r"<p>(\d+) nodes", text)
    assert int(count) >= 580 and text.count("<circle") == int(count)
    assert "reader 299" in text.lower() and "book 279" in text.lower()
    circles = set(re.findall(r'<circle cx="([\d.]+)" cy="([\d.]+)"', text))
    assert len(circles) == int(count)  # every node has a place of its own
