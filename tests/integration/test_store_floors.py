"""The baselines the scale sweep prints beside P-Mem (benchmarks/store_paths.py): the bounded sealed floor
does the work it is named for, and the read floor opens every event of a real store. Nothing is timed here."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson

import pmem
from benchmarks.store_paths import run_floor, run_read_floor


def _lines(n: int, keys: int) -> list[bytes]:
    return [orjson.dumps({"op": "accept", "key": f"key{i % keys}", "value": f"value-{i}", "source": "bench"})
            for i in range(n)]


def test_the_bounded_floor_seals_every_line_and_stores_one_key_per_cell(tmp_path: Path) -> None:
    db = tmp_path / "floor.db"
    run_floor(_lines(300, 40), db, bounded=True)
    conn = sqlite3.connect(db)
    versions = conn.execute("SELECT originator_id, COUNT(*), MIN(originator_version), MAX(originator_version)"
                            " FROM stored_events GROUP BY originator_id").fetchall()
    assert len(versions) == 40 and {(n, lo, hi) for _, n, lo, hi in versions} == {(8, 1, 8), (7, 1, 7)}
    keys = conn.execute("SELECT cell, life, length(key) FROM keys").fetchall()
    assert sorted(c for c, _, _ in keys) == sorted(c for c, *_ in versions)
    assert {(life, size) for _, life, size in keys} == {(1, 32)}
    state = orjson.loads(conn.execute("SELECT state FROM stored_events LIMIT 1").fetchone()[0])
    assert "value" not in state and "value-0" not in str(state)  # sealed, not in the clear


def test_the_unbounded_floor_stores_no_key(tmp_path: Path) -> None:
    db = tmp_path / "floor.db"
    run_floor(_lines(50, 5), db)
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT COUNT(*) FROM stored_events").fetchone()[0] == 50
    assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'keys'").fetchone() is None


def test_the_read_floor_opens_every_event_of_a_store(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    with pmem.open(db) as store:
        store.apply([orjson.loads(line) for line in _lines(200, 30)])
    assert run_read_floor(db) > 0  # it raises when an event does not open with its cell's key


def test_the_read_floor_stops_at_an_event_its_key_does_not_open(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    with pmem.open(db) as store:
        store.apply([orjson.loads(line) for line in _lines(20, 4)])
    conn = sqlite3.connect(db)
    conn.execute("UPDATE pmem_keys SET key = zeroblob(32)")
    conn.commit()
    conn.close()
    try:
        run_read_floor(db)
    except SystemExit as e:
        assert "could not open cell" in str(e)
    else:
        raise AssertionError("the read floor opened events under a wrong key")
