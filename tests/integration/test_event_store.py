"""The log itself: eventsourcing compatibility, stable topics, settings, and errors."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from eventsourcing.application import Application

import pmem
from domain.cell import EVENT_CLASSES, MemoryCell
from domain.keys import cell_id


def test_rows_written_by_the_lean_path_are_read_by_the_stock_eventsourcing_mapper(db_path: Path) -> None:
    with pmem.open(db_path) as s:
        s.accept("pb", "27:12", source="coach", trust=60)
        s.contest("pb", "26:00")
        s.resolve("pb", "26:00", trust=60)
        s.reject("pb", trust=60)
        s.revoke("nothing")
        ours = [(v.value, v.status) for v in s.history("pb").versions]
    stock = Application(env={"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(db_path)})
    cell = stock.repository.get(cell_id("default", "pb"))  # stock JSON transcoder, stock repository
    assert isinstance(cell, MemoryCell) and cell.version == 4
    assert [(v.value, v.status) for v in cell.state.versions] == ours
    assert ours == [("27:12", "contradicted"), ("26:00", "contradicted")]  # resolved, then rejected
    # and the stock mapper writes what the lean reader reads
    stock.save(stock.repository.get(cell_id("default", "pb")))  # nothing pending: no-op
    assert stock.recorder.max_notification_id() == 5


def test_every_event_class_has_an_explicit_stable_topic() -> None:
    topics = {cls.TOPIC for cls in EVENT_CLASSES}
    assert len(topics) == len(EVENT_CLASSES)
    assert all(t.startswith("pmem.cell/") and ":" not in t for t in topics)


def test_stored_topics_do_not_mention_module_paths(db_path: Path) -> None:
    with pmem.open(db_path) as s:
        s.accept("k", "v")
    topics = {t for (t,) in sqlite3.connect(db_path).execute("SELECT topic FROM stored_events")}
    assert topics == {"pmem.cell/Accepted"}


def test_the_log_is_a_wal_mode_sqlite_file_written_with_synchronous_full(store: pmem.Store) -> None:
    store.accept("k", "v")
    with store.log_store.recorder.datastore.transaction(commit=False) as c:
        c.execute("PRAGMA journal_mode")
        assert c.fetchone()[0] == "wal"
        c.execute("PRAGMA synchronous")
        assert c.fetchone()[0] == 2  # FULL


def test_the_synchronous_setting_may_be_relaxed(db_path: Path) -> None:
    with pmem.open(db_path, synchronous="NORMAL") as s:
        with s.log_store.recorder.datastore.transaction(commit=False) as c:
            c.execute("PRAGMA synchronous")
            assert c.fetchone()[0] == 1


def test_an_unknown_synchronous_setting_is_a_clear_error(db_path: Path) -> None:
    with pytest.raises(pmem.StoreUnavailable, match="PMEM_SYNCHRONOUS"):
        pmem.open(db_path, synchronous="SOMETIMES")


def test_a_store_in_a_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(pmem.StoreUnavailable, match="does not exist"):
        pmem.open(tmp_path / "nope" / "mem.db")


def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "mem.db"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(pmem.StoreUnavailable):
        with pmem.open(bad) as s:
            s.accept("k", "v")


def test_an_invalid_batch_writes_nothing(store: pmem.Store) -> None:
    with pytest.raises(pmem.InvalidBatch, match="line 2: missing 'value'"):
        store.apply([{"op": "accept", "key": "a", "value": "1"}, {"op": "accept", "key": "b"}])
    assert store.last_index() == 0


def test_namespaces_are_separate_cells(db_path: Path) -> None:
    with pmem.open(db_path, namespace="a") as a, pmem.open(db_path, namespace="b") as b:
        a.accept("city", "Paris")
        b.accept("city", "Rome")
        assert [c.value for c in a.frontier()] == ["Paris"] and [c.value for c in b.frontier()] == ["Rome"]
        assert [e["value"] for e in b.log()] == ["Rome"]
