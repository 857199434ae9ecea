"""P-Mem's own cells (``_alias.*`` from soft key identity) are hidden from frontier, read, next and the
graph unless asked for (``system=True``, ``--system``)."""

from __future__ import annotations

from pathlib import Path

import pytest

import pmem
from pmem.adapters.service.ingest import Ingestor, make_identity
from pmem.adapters.service.soft_keys import DEFAULT_THRESHOLD
from pmem.adapters.sources.records import read_records
from pmem.domain.errors import InvalidOperation
from pmem.domain.extraction.template import TemplateExtractor
from tests.e2e.test_cli import ok

RECORDS = "My favorite color is now teal.\nMy favourite colour is now navy.\nMy manager is now Dana.\n"


def merged(store: pmem.Store) -> None:
    """Write the records with the default soft identity: the second merges, leaving ``_alias.favourite_colour``."""
    identity = make_identity(store, "auto", "template", None, DEFAULT_THRESHOLD)
    receipts = list(Ingestor(store, TemplateExtractor(), identity=identity).run(read_records(RECORDS.encode(),
                                                                                            "lines")))
    assert [r["key"] for r in receipts] == ["favorite_color", "_alias.favourite_colour", "favorite_color", "manager"]


def test_the_frontier_lists_system_cells_only_when_asked(store: pmem.Store) -> None:
    merged(store)
    assert [c.key for c in store.frontier()] == ["favorite_color", "manager"]
    assert [c.key for c in store.frontier(system=True)] == ["_alias.favourite_colour", "favorite_color", "manager"]
    assert [c.key for c in store.frontier(as_of=2, system=True)] == ["_alias.favourite_colour", "favorite_color"]
    with pytest.raises(InvalidOperation, match="system must be true or false"):
        store.frontier(system="yes")  # type: ignore[arg-type]


def test_read_leaves_out_system_cells_and_alias_evidence_unless_asked(store: pmem.Store) -> None:
    merged(store)
    cells = store.read("favourite colour", k=12)
    assert not any(k.startswith("_") for k in cells.items) and "favorite_color = navy" in cells.context
    turns = store.read("favourite colour", mode="turns", k=12)
    assert "soft key identity" not in turns.context and "My favourite colour is now navy." in turns.context
    shown = store.read("favourite colour", mode="turns", k=12, system=True)
    assert "soft key identity: 'favourite_colour' is 'favorite_color'" in shown.context


def test_the_graph_leaves_out_system_cells_and_what_only_they_made(store: pmem.Store) -> None:
    merged(store)
    g = store.graph()
    assert sorted(g.entities) == ["dana", "favorite_color", "manager", "navy"]
    assert g.entities["favorite_color"].text == "favorite color"  # not the alias's value
    assert not any(s.startswith("_") for edge in g.prerequisites | g.associations for s in edge)
    full = store.graph(system=True)
    assert "_alias" in full.entities and ("_alias", "favorite_color") in full.prerequisites


def test_the_cli_hides_system_cells_unless_given_system(db_path: Path, tmp_path: Path) -> None:
    f = tmp_path / "in.txt"
    f.write_text(RECORDS)
    receipts = ok(db_path, "ingest", str(f))  # the default: --soft-keys auto
    assert receipts[1]["key"] == "_alias.favourite_colour"
    assert receipts[1]["reason"].startswith("merged into favorite_color: cosine ")
    assert [c["key"] for c in ok(db_path, "frontier")] == ["favorite_color", "manager"]
    assert [c["key"] for c in ok(db_path, "frontier", "--system")][0] == "_alias.favourite_colour"
    (graph,) = ok(db_path, "graph", "export")
    assert not any(n["id"].startswith("_") for n in graph["nodes"])
    (full,) = ok(db_path, "graph", "export", "--system")
    assert any(n["id"] == "_alias" for n in full["nodes"])
    proposals = ok(db_path, "next", "--k", "20")
    assert proposals and all(not p["entity"].startswith("_") and not any(r.startswith("_") for r in p["requires"])
                             for p in proposals)
    assert ok(db_path, "next", "--k", "20", "--system")  # the graph with the alias cells
    (read,) = ok(db_path, "read", "favourite colour", "--mode", "turns")
    assert "soft key identity" not in read["context"]
    (read,) = ok(db_path, "read", "favourite colour", "--mode", "turns", "--system")
    assert "soft key identity" in read["context"]
