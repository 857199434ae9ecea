"""The full rebuild split by ranges of cell id and spread over worker processes (SQLite files)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pmem
from pmem.adapters.eventstore.stored_log import EVENTS_TABLE, SCAN_RANGES, range_rows
from pmem.adapters.readmodels import parallel_rebuild
from pmem.adapters.readmodels.parallel_rebuild import by_cell, cell_ranges, fold_ranges, fold_rows, split
from pmem.adapters.readmodels.sqlite_projection import TRACKING
from pmem.domain.errors import ProjectionStopped
from pmem.projections.frontier_rebuild import CellRows
from tests.conftest import examples
from tests.integration.test_projection import dump, fresh_sqlite, shadow_tables, write_log


def pragmas(conn: sqlite3.Connection) -> list[Any]:
    return [conn.execute(f"PRAGMA {name}").fetchone()[0]
            for name in ("secure_delete", "busy_timeout", "wal_autocheckpoint", "synchronous", "cache_size")]


@pytest.mark.parametrize(("workers", "chunk", "piece"), [(2, 100, 1 << 20), (3, 40, 7), (2, 9, 3), (2, 400, 25)])
def test_a_rebuild_over_worker_processes_equals_the_incremental_projection(
        db_path: Path, workers: int, chunk: int, piece: int) -> None:
    """400 events in ranges of about ``chunk`` events, shared by this process and ``workers - 1``
    others, each range written in pieces of at least ``piece`` events (a transaction each); 9 events
    a range makes more than SCAN_RANGES ranges, read through the log's index."""
    with pmem.open(db_path) as store:
        write_log(store, 400, seed=5)
        store.catch_up()
        want = dump(store.projection_db)
        projection = store.frontier_projection
        projection.rebuild_workers, projection.parallel_from, projection.rebuild_chunk = workers, 0, chunk
        projection.rebuild_piece = piece
        assert (400 // chunk > SCAN_RANGES) == (chunk == 9)
        settings = pragmas(store.projection_db.raw)
        assert store.rebuild("frontier")["events"] == 400
        assert pragmas(store.projection_db.raw) == settings  # the rebuild's own settings undone
        assert dump(store.projection_db) == want
        assert dump(fresh_sqlite(store).conn) == want
        assert projection.position() == 400
        assert shadow_tables(store.projection_db) == []
        store.apply([{"op": "accept", "key": "k1", "value": "after the rebuild"}])
        assert store.get("k1").value == "after the rebuild"


def test_workers_run_this_package_whatever_folder_the_caller_runs_in(
        db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``python -m`` looks in the current folder first: a folder holding another copy of the package
    (here one whose worker fails at once) must not be the one the workers run."""
    decoy = tmp_path / "elsewhere" / "pmem"
    (decoy / "adapters" / "readmodels").mkdir(parents=True)
    for init in (decoy, decoy / "adapters", decoy / "adapters" / "readmodels"):
        (init / "__init__.py").write_text("")
    (decoy / "adapters" / "readmodels" / "parallel_rebuild.py").write_text("raise SystemExit('the decoy copy ran')\n")
    monkeypatch.chdir(decoy.parent)
    with pmem.open(db_path) as store:
        write_log(store, 200, seed=3)
        store.catch_up()
        want = dump(store.projection_db)
        projection = store.frontier_projection
        projection.rebuild_workers, projection.parallel_from, projection.rebuild_chunk = 2, 0, 50
        assert projection.rebuild() == 200
        assert dump(store.projection_db) == want


def test_a_failing_worker_is_one_line_and_leaves_the_old_projection_for_the_next_rebuild(db_path: Path) -> None:
    with pmem.open(db_path) as store:
        write_log(store, 200, seed=2)
        store.catch_up()
        want = dump(store.projection_db)
        # an undecodable event of a cell in the last range: a worker process folds it, not this one
        store.projection_db.execute(
            "INSERT INTO stored_events (originator_id, originator_version, topic, state) VALUES (?, 1, ?, ?)",
            ("f" * 32, "pmem.cell/Accepted", b"{not json"))
        projection = store.frontier_projection
        projection.rebuild_workers, projection.parallel_from, projection.rebuild_chunk = 2, 0, 50
        with pytest.raises(ProjectionStopped) as failed:  # the event it cannot apply, by index (screening)
            projection.rebuild()
        message = str(failed.value)
        assert "stopped at event 201 in every namespace: JSONDecodeError" in message
        assert "\n" not in message
        assert dump(store.projection_db) == want and projection.position() == 200
        # what the workers wrote is only in shadow tables, which the next rebuild starts by dropping
        store.projection_db.execute("DELETE FROM stored_events WHERE originator_id = ?", ("f" * 32,))
        assert projection.rebuild() == 200
        assert dump(store.projection_db) == want and shadow_tables(store.projection_db) == []


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lock=st.lists(st.booleans(), min_size=1, max_size=30), idle=st.lists(st.booleans(), max_size=10),
       piece=st.integers(1, 60), ranges=st.integers(1, 5))
def test_pieces_queued_while_the_lock_is_taken_are_all_written_once_in_order(
        logged: tuple[Path, list[Any]], monkeypatch: pytest.MonkeyPatch, lock: list[bool], idle: list[bool],
        piece: int, ranges: int) -> None:
    """``fold_ranges`` against a lock that comes and goes (``lock``, cycled: whether a try gets it) and
    an idle task that asks to run again or not (``idle``): every piece is written exactly once, in
    primary-key order, the rows are those of folding everything at once, a write only waits once
    everything is folded and the idle task has said to stop, or when more than ``MAX_QUEUED`` folded
    pieces are held (never more than one over), and ``done`` counts every event."""
    db_path, rows = logged
    tries = iter(lock * 1000)
    idles = iter(idle)
    written: list[CellRows] = []
    calls: list[str] = []
    counted: list[int] = []
    fold = parallel_rebuild.fold_pieces

    def counted_fold(*args: Any) -> Any:
        for out in fold(*args):
            calls.append("fold")
            yield out

    monkeypatch.setattr(parallel_rebuild, "fold_pieces", counted_fold)

    def write(out: CellRows, wait: float) -> bool:
        got = wait > 0 or next(tries)
        calls.append(f"write {wait > 0} {got}")
        if got:
            written.append(out)
        return got

    def idle_task() -> bool:
        calls.append("idle")
        return next(idles, False)

    conn = sqlite3.connect(db_path)
    try:
        events = fold_ranges(cell_ranges(ranges), lambda cells: range_rows(conn, EVENTS_TABLE, cells, 1 << 62, ranges),
                             write, piece, counted.append, idle_task)
    finally:
        conn.close()
    assert events == len(rows) == sum(counted) == sum(out.events for out in written)
    merged = CellRows()
    for out in written:
        merged.extend(out)
    assert merged.rows == fold_rows(rows).rows  # every row once, in primary-key (cell id) order
    held = [calls[:i].count("fold") - calls[:i].count("write False True") - calls[:i].count("write True True")
            for i in range(len(calls) + 1)]
    assert max(held) <= parallel_rebuild.MAX_QUEUED + 1
    waited = [i for i, c in enumerate(calls) if c.startswith("write True")]
    # a write waits only after the idle task said stop, or while too many folded pieces are held
    assert all(calls[i - 1] == "idle" or held[i] > parallel_rebuild.MAX_QUEUED for i in waited)


def test_rows_read_in_cell_order_are_taken_a_cell_at_a_time(logged: tuple[Path, list[Any]]) -> None:
    """Rows read through the index (past SCAN_RANGES ranges) are grouped as they stream in: when a cell
    is taken, no row past the next cell's first has been read; the cells are those grouped in memory
    from a scan; rows out of cell order are an error, not a cell folded twice."""
    db_path, rows = logged
    ranges = SCAN_RANGES + 1
    conn = sqlite3.connect(db_path)
    try:
        ordered = [r for cells in cell_ranges(ranges) for r in range_rows(conn, EVENTS_TABLE, cells, 1 << 62, ranges)]
    finally:
        conn.close()
    read = 0

    def stream() -> Any:
        nonlocal read
        for row in ordered:
            read += 1
            yield row

    taken = []
    for cid, cell_rows in by_cell(stream(), in_cell_order=True):
        taken.append((cid, cell_rows))
        assert read <= sum(len(r) for _, r in taken) + 1
    assert taken == list(by_cell(rows)) and len(taken) > 1
    with pytest.raises(RuntimeError, match="out of cell order"):
        list(by_cell(reversed(ordered), in_cell_order=True))


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Any]]:
    """A store with a 300-event log, and its stored rows."""
    db_path = tmp_path_factory.mktemp("fold-ranges") / "log.db"
    with pmem.open(db_path) as store:
        write_log(store, 300, seed=7)
    conn = sqlite3.connect(db_path)
    try:
        return db_path, range_rows(conn, EVENTS_TABLE, ("", None), 1 << 62, 1)
    finally:
        conn.close()


@given(count=st.integers(1, 300), parts=st.integers(1, 8),
       ids=st.lists(st.integers(0, (1 << 128) - 1), min_size=1, max_size=50))
def test_cell_ranges_cover_every_id_once_in_order_and_split_keeps_them_contiguous(
        count: int, parts: int, ids: list[int]) -> None:
    ranges = cell_ranges(count)
    assert len(ranges) == count and ranges[0][0] == "" and ranges[-1][1] is None
    assert all(hi == lo for (_, hi), (lo, _) in zip(ranges, ranges[1:], strict=False))
    for i in ids:
        hexid = f"{i:032x}"
        assert sum(lo <= hexid and (hi is None or hexid < hi) for lo, hi in ranges) == 1
    shares = split(ranges, parts)
    assert len(shares) == parts and [r for share in shares for r in share] == ranges
    assert max(map(len, shares)) - min(map(len, shares)) <= 1


def test_an_in_memory_store_rebuilds_in_one_process_through_the_event_log() -> None:
    """A memory store has no file for workers to read: it folds its ranges itself, reading them
    through the EventLog's recorder (also the path of a first read that finds a large unprojected log)."""
    with pmem.open(":memory:") as store:
        write_log(store, 300, seed=7)
        store.catch_up()
        want = dump(store.projection_db)
        projection = store.frontier_projection
        projection.rebuild_workers, projection.parallel_from, projection.rebuild_chunk = 2, 0, 60
        assert projection._workers(300, projection._store_path()) == 1
        assert store.rebuild("frontier")["events"] == 300
        assert dump(store.projection_db) == want
        store.projection_db.execute(f"UPDATE {TRACKING} SET version = version - 1")  # a first read of a big log
    with pmem.open(":memory:") as store:
        write_log(store, 300, seed=7)
        store.frontier_projection.full_replay_from = 100
        store.frontier_projection.rebuild_chunk = 60
        assert store.frontier() and dump(store.projection_db) == want
        assert store.frontier_projection.position() == 300


def test_a_rebuild_leaves_no_cipher_per_cell_in_the_key_cache(db_path: Path) -> None:
    """A sealed store's rebuild opens each cell's events with its key, then lets the key go: the
    process's key cache does not grow with the cells folded (it held one cipher per cell, 2.4 KB each),
    and the rebuilt tables still equal the incremental ones (sealed values opened)."""
    from pmem.adapters.eventstore import sealing

    with pmem.open(db_path) as store:
        write_log(store, 400, seed=7)
        store.catch_up()
        want = dump(store.projection_db)
        sealing.CACHE.clear()
        projection = store.frontier_projection
        projection.rebuild_workers, projection.rebuild_chunk = 1, 100
        assert store.rebuild("frontier")["events"] == 400
        assert dump(store.projection_db) == want
        cells = store.projection_db.execute("SELECT COUNT(*) FROM cells").fetchone()[0]
        assert cells > 20
        assert len(sealing.CACHE) == 0
