"""The log itself: eventsourcing compatibility, stable topics, settings, and errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from eventsourcing.application import Application

import pmem
from pmem.domain.cell import EVENT_CLASSES, MemoryCell
from pmem.domain.keys import cell_id


class StockPmem(Application[Any]):
    """A stock eventsourcing application reading P-Mem's table (its name picks the table on PostgreSQL)."""

    name = "pmem"


def stock_application(db: str) -> StockPmem:
    from pmem.adapters.storage.backend import open_backend

    env = open_backend(db).log_env("FULL")
    stock = {"pmem.adapters.eventstore.sqlite_log:Factory": "eventsourcing.sqlite",
             "pmem.adapters.eventstore.pg_log:Factory": "eventsourcing.postgres"}
    env["PERSISTENCE_MODULE"] = stock.get(env["PERSISTENCE_MODULE"], env["PERSISTENCE_MODULE"])
    return StockPmem(env=env)


def test_rows_written_by_the_lean_path_are_read_by_the_stock_eventsourcing_mapper(db: str) -> None:
    """Plaintext rows (as written before sealing; sealed fields only P-Mem's codec opens: docs/forgetting.md)."""
    with pmem.open(db) as s:
        s.log_store.sealing = False
        s.accept("pb", "27:12", source="coach", trust=60)
        s.contest("pb", "26:00")
        s.resolve("pb", "26:00", trust=60)
        s.reject("pb", trust=60)
        s.revoke("nothing")
        ours = [(v.value, v.status) for v in s.history("pb").versions]
    stock = stock_application(db)
    cell = stock.repository.get(cell_id("default", "pb"))  # stock JSON transcoder, stock repository
    assert isinstance(cell, MemoryCell) and cell.version == 4
    assert [(v.value, v.status) for v in cell.state.versions] == ours
    assert ours == [("27:12", "contradicted"), ("26:00", "contradicted")]  # resolved, then rejected
    # and the stock mapper writes what the lean reader reads
    stock.save(stock.repository.get(cell_id("default", "pb")))  # nothing pending: no-op
    assert stock.recorder.max_notification_id() == 5
    stock.close()


def test_every_event_class_has_an_explicit_stable_topic() -> None:
    topics = {cls.TOPIC for cls in EVENT_CLASSES}
    assert len(topics) == len(EVENT_CLASSES)
    assert all(t.startswith("pmem.cell/") and ":" not in t for t in topics)


def test_stored_topics_do_not_mention_module_paths(db: str) -> None:
    with pmem.open(db) as s:
        s.accept("k", "v")
        topics = {row[3] for row in s.log_store.recorder.select_rows(1, None, 100)}
    assert topics == {"pmem.cell/Accepted"}


def test_the_log_is_a_wal_mode_sqlite_file_written_with_synchronous_full(db_path: Path) -> None:
    """SQLite-only: WAL and the synchronous PRAGMA are SQLite's (PostgreSQL commits durably by default)."""
    store = pmem.open(db_path)
    store.accept("k", "v")
    with store.log_store.recorder.datastore.transaction(commit=False) as c:
        c.execute("PRAGMA journal_mode")
        assert c.fetchone()[0] == "wal"
        c.execute("PRAGMA synchronous")
        assert c.fetchone()[0] == 2  # FULL
    store.close()


def test_the_synchronous_setting_may_be_relaxed(db_path: Path) -> None:
    """SQLite-only (a PRAGMA)."""
    with pmem.open(db_path, synchronous="NORMAL") as s:
        with s.log_store.recorder.datastore.transaction(commit=False) as c:
            c.execute("PRAGMA synchronous")
            assert c.fetchone()[0] == 1


def test_an_unknown_synchronous_setting_is_a_clear_error(db_path: Path) -> None:
    """SQLite-only (``PMEM_SYNCHRONOUS`` is a SQLite PRAGMA)."""
    with pytest.raises(pmem.StoreUnavailable, match="PMEM_SYNCHRONOUS"):
        pmem.open(db_path, synchronous="SOMETIMES")


def test_a_store_in_a_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(pmem.StoreUnavailable, match="does not exist"):
        pmem.open(tmp_path / "nope" / "mem.db")


@pytest.mark.parametrize("name", ["x" * 300, "x" * 300 + "/mem.db"])  # (found by tests/fuzz/test_fuzz_cli.py)
def test_a_name_too_long_for_the_file_system_is_a_clear_error(tmp_path: Path, name: str) -> None:
    with pytest.raises(pmem.StoreUnavailable, match="^cannot open store .*: File name too long$"):
        pmem.open(tmp_path / name)


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


def test_namespaces_are_separate_cells(db: str) -> None:
    with pmem.open(db, namespace="a") as a, pmem.open(db, namespace="b") as b:
        a.accept("city", "Paris")
        b.accept("city", "Rome")
        assert [c.value for c in a.frontier()] == ["Paris"] and [c.value for c in b.frontier()] == ["Rome"]
        assert [e["value"] for e in b.log()] == ["Rome"]


def test_an_unreachable_postgresql_server_is_a_clear_error() -> None:
    with pytest.raises(pmem.StoreUnavailable, match=r"cannot open store postgresql://pmem@127.0.0.1:1/x: .*refused"):
        pmem.open("postgresql://pmem@127.0.0.1:1/x")


def test_a_postgresql_url_without_a_database_is_bad_input() -> None:
    with pytest.raises(pmem.InvalidOperation, match="must name a host and a database"):
        pmem.open("postgresql://pmem@127.0.0.1:5432/")


def test_a_password_in_the_url_never_appears_in_an_error() -> None:
    with pytest.raises(pmem.StoreUnavailable) as e:
        pmem.open("postgresql://pmem:s3cret@127.0.0.1:1/x")
    assert "s3cret" not in str(e.value) and "pmem:***@" in str(e.value)


def test_without_the_driver_a_postgresql_url_names_the_extra_to_install(tmp_path: Path) -> None:
    """psycopg hidden from the import system, as in an installation without the ``postgres`` extra."""
    code = ("import sys; sys.modules['psycopg'] = None; sys.modules['psycopg_pool'] = None\n"
            "from pmem.adapters.entrypoints.cli import main\n"
            "main(['--db', 'postgresql://pmem@127.0.0.1:5432/x', 'stats'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                         env={"PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.strip() == ('{"error":"store unavailable","detail":"PostgreSQL support is not installed: '
                                  'pip install \'pmem[postgres]\' (psycopg 3 and its pool)"}')
