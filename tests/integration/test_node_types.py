"""Graph node types on real SQLite files: supplied with the evidence, carried on the event (class
version 2), read back by the graph projection from the log; an event stored before they existed
(class version 1) still loads, and gets the rule-based type."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from eventsourcing.application import Application

import pmem
from pmem.adapters.readmodels.graph_projection import TABLE
from pmem.adapters.service.ingest import Ingestor
from pmem.adapters.sources.records import read_records
from pmem.domain.cell import CellEvent, MemoryCell
from pmem.domain.errors import InvalidOperation
from pmem.domain.extraction.template import TemplateExtractor
from pmem.domain.keys import cell_id

# An Accepted event exactly as the version-1 code stored it: no node_type, no class_version.
V1_ACCEPT = orjson.dumps({
    "namespace": "default", "key": "ada.spouse", "requested": "accept", "reason": None, "text": None,
    "source": "old log", "trust": 50, "observed_at": None, "op_id": None, "value": "William King", "vid": 0,
    "supersedes": None, "timestamp": {"_type_": "datetime_iso", "_data_": "2026-01-01T00:00:00+00:00"},
})


def kinds(store: pmem.Store, as_of: int | None = None) -> dict[str, str]:
    return {slug: e.kind for slug, e in store.graph(as_of=as_of).entities.items() if e.facts}


def test_an_event_stored_in_the_version_1_shape_still_loads_and_gets_the_rule_based_type(db_path: Path) -> None:
    with pmem.open(db_path) as store:  # a row as the release before wrote it, with no cell state beside it
        store.log_store.recorder.insert_rows(
            iter([(cell_id("default", "ada.spouse").hex, 1, "pmem.cell/Accepted", V1_ACCEPT)]), [1])
    with pmem.open(db_path) as store:  # opening builds the cell state from the log
        assert store.get("ada.spouse").value == "William King"
        ((_, event),) = store.log_store.indexed_events()
        assert event.node_type is None and event.value == "William King"  # upcast to version 2
        (logged,) = store.log()
        assert "node_type" not in logged and logged["source"] == "old log"
        assert kinds(store) == {"ada": "relationship"}  # no type supplied: the rule, from "spouse"
        r = store.support("ada.spouse", node_type="persona")  # new evidence supplies one: it wins
        assert r.op == "support" and kinds(store) == {"ada": "persona"}
        assert kinds(store, as_of=1) == {"ada": "relationship"}
    stock = Application(env={"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(db_path)})
    cell = stock.repository.get(cell_id("default", "ada.spouse"))  # the library's own mapper upcasts too
    assert isinstance(cell, MemoryCell) and cell.state.versions[0].node_type == "persona"


def test_a_new_event_is_stored_as_class_version_2_with_its_node_type(db_path: Path) -> None:
    with pmem.open(db_path) as store:
        store.accept("ada.wedding", "1835", node_type="event")
        store.accept("ada.nickname", "Enchantress")
        rows = store.log_store.recorder.select_rows(1, None, 10)
    stored = [orjson.loads(r[4]) for r in rows]
    assert [(d["class_version"], d["node_type"]) for d in stored] == [(2, "event"), (2, None)]
    assert CellEvent.class_version == 2


def test_a_supplied_type_wins_and_a_rollback_brings_back_the_type_of_the_version_it_reopens(
        store: pmem.Store) -> None:
    store.accept("bob.nickname", "Bobby", node_type="event")
    assert kinds(store) == {"bob": "event"}
    store.accept("bob.nickname", "Rob")  # no type supplied: the rule (a nickname is persona)
    assert kinds(store) == {"bob": "persona"}
    store.revoke("bob.nickname")  # "Bobby" is head again, with the type its evidence supplied
    assert kinds(store) == {"bob": "event"}
    assert [kinds(store, as_of=n) for n in (1, 2, 3)] == [{"bob": "event"}, {"bob": "persona"}, {"bob": "event"}]


def test_rebuilding_the_graph_from_the_log_gives_the_same_typed_rows(store: pmem.Store) -> None:
    store.accept("carol.employer", "Acme", node_type="persona")
    store.contest("carol.employer", "Initech", node_type="relationship")
    store.resolve("carol.employer", "Initech", node_type="event")
    store.accept("dan.nickname", "Danny")
    live = kinds(store)
    conn = store.projection_db
    before = conn.execute(f"SELECT * FROM {TABLE} ORDER BY cell_id, opened_at").fetchall()
    store.rebuild("graph")
    assert conn.execute(f"SELECT * FROM {TABLE} ORDER BY cell_id, opened_at").fetchall() == before
    assert kinds(store) == live == {"carol": "event", "dan": "persona"}


def test_an_invalid_node_type_is_refused_naming_it_and_nothing_is_written(store: pmem.Store) -> None:
    with pytest.raises(InvalidOperation, match="'node_type' must be one of event, persona, relationship"):
        store.accept("ada.spouse", "William King", node_type="spouse")
    assert store.last_index() == 0


def test_ingest_writes_the_template_extractors_types_and_a_record_may_override_them(store: pmem.Store) -> None:
    records = [json.dumps(r) for r in (
        {"text": "Charles Dickens is married to Catherine Hogarth."},
        {"text": "Update: mug 1 has been moved from cabinet 2 to shelf 3."},
        {"text": "The capital of France is Paris.", "node_type": "event"},
        {"text": "The capital of Peru is Lima.", "node_type": "place"},
    )]
    receipts = list(Ingestor(store, TemplateExtractor()).run(read_records("\n".join(records).encode(), "jsonl")))
    assert [r["applied"] for r in receipts] == [True, True, True, False]
    assert receipts[3]["reason"].startswith("invalid observation: 'node_type' must be one of")
    assert kinds(store) == {"charles_dickens": "relationship", "mug_1": "event", "france": "event"}
