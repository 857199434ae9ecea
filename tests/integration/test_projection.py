"""The frontier projection (SPEC §4): rebuilt from the log it equals the incrementally maintained
one, its ``as_of`` reads equal the replay reader's, and an interrupted catch-up resumes without
applying any event twice or skipping one. Real SQLite files and PostgreSQL schemas, no mocks."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import pmem
from pmem.adapters.readmodels import sqlite_projection
from pmem.adapters.readmodels.registry import VECTORS
from pmem.adapters.readmodels.sqlite_projection import SHADOW, TRACKING, FrontierProjection
from pmem.domain.state import CellState
from pmem.projections.frontier import SCHEMA_VERSION, TABLES, VIEWS, Changes
from pmem.projections.replay import Timeline
from tests.conftest import ROOT, Backend

NAMESPACES = ("default", "work")
KEYS = ("k1", "k2", "k3")
DISCLOSE = ("history", "alternatives", "support")
STEP = st.tuples(
    st.sampled_from(NAMESPACES), st.sampled_from(KEYS[:1] * 3 + KEYS),  # mostly one cell: long stories
    st.sampled_from(["accept", "accept", "accept", "contest", "contest", "reject", "revoke", "revoke",
                     "resolve", "support", "revise"]),
    st.one_of(st.none(), st.sampled_from(["a", "b", "c"])),
    st.sampled_from([30, 50, 80]),
    st.sampled_from([None, "s1", "s2"]),
)
Step = tuple[str, str, str, str | None, int, str | None]


def as_op(step: Step) -> dict[str, Any]:
    namespace, key, op, value, trust, source = step
    d: dict[str, Any] = {"op": op, "key": key, "trust": trust, "namespace": namespace}
    if source is not None:
        d["source"] = source
    if op == "revise":
        d["new_value"] = value or "a"
        d["status"] = "correction" if trust == 30 else "update"
    elif value is not None or op in ("accept", "contest", "resolve"):
        d["value"] = value or "a"
    return d


def dump(conn: Any) -> dict[str, list[tuple[Any, ...]]]:
    """Every projection table, row by row, in primary-key order, and every view (whose first four
    columns are unique) in the order of those."""
    tables = {table: conn.execute(f"SELECT * FROM {table} ORDER BY {', '.join(pk)}").fetchall()
              for table, (_, pk) in TABLES.items()}
    return tables | {view: conn.execute(f"SELECT * FROM {view} ORDER BY 1, 2, 3, 4").fetchall() for view in VIEWS}


def fresh(backend: Backend, store: pmem.Store, upto: int | None = None) -> FrontierProjection:
    """A projection built from index 1 into a fresh, separate database on the same backend."""
    p = FrontierProjection(backend.fresh_projection_db(), store.log_store)
    p.catch_up(upto)
    return p


def fresh_sqlite(store: pmem.Store) -> FrontierProjection:
    """A projection built from index 1 into a private SQLite memory database (SQLite-only tests)."""
    p = FrontierProjection(sqlite3.connect(":memory:", isolation_level=None), store.log_store)
    p.catch_up()
    return p


def apply_in_batches(store: pmem.Store, ops: list[dict[str, Any]], cuts: list[int]) -> None:
    """Apply ``ops`` cut into batches, reading between batches (each read catches the projection up)."""
    bounds = [0, *sorted(c for c in cuts if 0 < c < len(ops)), len(ops)]
    for lo, hi in pairwise(bounds):
        store.apply(ops[lo:hi])
        store.frontier()
        store.get("k1", namespace="work")


def test_a_rebuild_from_scratch_equals_the_incrementally_maintained_projection(backend: Backend) -> None:
    """Each batch is applied and read by a newly opened store (as by a new process), so catching up
    resumes from the stored rows; ``cache`` bounds the cells the projector keeps between batches.
    On SQLite the rebuild takes its own path (cell by cell, final rows only, read in ranges of
    ``chunk`` events and committed in pieces of ``piece`` into shadow tables); on PostgreSQL it replays
    in place. Both must produce the same rows."""

    @settings(max_examples=backend.max_examples(sqlite=200, postgres=30), deadline=None)
    @given(steps=st.lists(STEP, min_size=1, max_size=60), cuts=st.lists(st.integers(0, 60), max_size=4),
           batch_size=st.sampled_from([1, 2, 7, 1000]), cache=st.sampled_from([0, 1, 100_000]),
           chunk=st.sampled_from([1, 5, sqlite_projection.REBUILD_CHUNK]),
           piece=st.sampled_from([1, 4, sqlite_projection.PIECE_EVENTS]))
    @example(steps=[("default", "k1", "accept", "a", 50, None), ("default", "k1", "contest", "b", 50, None),
                    ("default", "k1", "contest", "c", 50, None), ("default", "k1", "resolve", "b", 50, None),
                    ("default", "k1", "revoke", None, 80, None)], cuts=[3], batch_size=1, cache=0, chunk=1,
             piece=1)
    def check(steps: list[Step], cuts: list[int], batch_size: int, cache: int, chunk: int, piece: int) -> None:
        ops = [as_op(s) for s in steps]
        bounds = [0, *sorted(c for c in cuts if 0 < c < len(ops)), len(ops)]
        path = backend.new_url()
        for lo, hi in pairwise(bounds):
            with pmem.open(path) as store:
                store.frontier_projection.batch_size = batch_size
                store.frontier_projection.projector.max_cached_cells = cache
                apply_in_batches(store, ops[lo:hi], [(hi - lo) // 2])
        with pmem.open(path) as store:
            store.catch_up()
            live = dump(store.projection_db)
            assert store.frontier_projection.position() == len(ops)
            assert dump(fresh(backend, store).conn) == live  # a fresh projection in a separate database
            store.frontier_projection.rebuild_chunk = chunk
            store.frontier_projection.rebuild_piece = piece
            rebuilt = store.rebuild("frontier")
            assert rebuilt["events"] == len(ops) and rebuilt["seconds"] >= 0
            assert dump(store.projection_db) == live  # and one rebuilt in place
            assert store.frontier_projection.position() == len(ops)

    check()


def test_as_of_reads_from_the_projection_equal_the_replay_readers(backend: Backend) -> None:

    @settings(max_examples=backend.max_examples(sqlite=60, postgres=20), deadline=None)
    @given(steps=st.lists(STEP, min_size=1, max_size=50), cuts=st.lists(st.integers(0, 50), max_size=3),
           data=st.data())
    def check(steps: list[Step], cuts: list[int], data: st.DataObject) -> None:
        ops = [as_op(s) for s in steps]
        points = data.draw(st.lists(st.one_of(st.none(), st.integers(0, len(ops) + 2)), min_size=1, max_size=6))
        path = backend.new_url()
        with pmem.open(path) as store, pmem.open(path, reader="replay") as replay:
            apply_in_batches(store, ops, cuts)
            for n in points:
                for ns in NAMESPACES:
                    for disclose in ((), DISCLOSE):
                        got = store.frontier(as_of=n, namespace=ns, disclose=disclose)
                        assert got == replay.frontier(as_of=n, namespace=ns, disclose=disclose), (n, ns)
                    for key in KEYS:
                        got_cell = store.get(key, as_of=n, namespace=ns, disclose=DISCLOSE)
                        assert got_cell == replay.get(key, as_of=n, namespace=ns, disclose=DISCLOSE)
                        assert got_cell.to_dict() == replay.get(key, as_of=n, namespace=ns,
                                                                disclose=DISCLOSE).to_dict()
                        assert store.history(key, as_of=n, namespace=ns) == replay.history(
                            key, as_of=n, namespace=ns), (n, ns, key)

    check()


def test_a_reopened_version_has_one_interval_row_per_opening_and_a_status_row_per_change(
        store: pmem.Store) -> None:
    store.accept("budget", "$30k")  # 1
    store.accept("budget", "$50k")  # 2: $30k superseded
    store.revoke("budget")  # 3: $50k revoked, $30k reopens
    store.accept("budget", "$40k")  # 4: $30k superseded again
    store.catch_up()
    conn = store.projection_db
    assert conn.execute("SELECT opened_at, closed_at FROM intervals WHERE vid = 0 ORDER BY opened_at"
                        ).fetchall() == [(1, 2), (3, 4)]
    assert conn.execute("SELECT status, from_index, to_index FROM version_status WHERE vid = 0 "
                        "ORDER BY from_index").fetchall() == [
        ("active", 1, 2), ("superseded", 2, 3), ("active", 3, 4), ("superseded", 4, None)]
    # stored: the closed runs in their own table, the current status in the version's row
    assert conn.execute("SELECT from_index, to_index FROM status_history WHERE vid = 0 ORDER BY from_index"
                        ).fetchall() == [(1, 2), (2, 3), (3, 4)]
    assert conn.execute("SELECT status, status_since FROM versions WHERE vid = 0").fetchall() == [("superseded", 4)]
    edges = conn.execute("SELECT kind, src, dst, event_index FROM edges ORDER BY event_index, kind")
    assert edges.fetchall() == [
        ("supersedes", 1, 0, 2), ("revokes", 3, 1, 3), ("supersedes", 2, 0, 4)]


REOPENS = [("default", "k1", "accept", "a", 50, None), ("default", "k1", "accept", "b", 50, None),
           ("default", "k1", "revoke", None, 80, None), ("default", "k1", "contest", "c", 50, None),
           ("default", "k1", "revoke", None, 80, None), ("default", "k1", "accept", "d", 50, None),
           ("default", "k1", "revoke", None, 80, None), ("default", "k1", "support", None, 50, "s1")]


def reference_views(store: pmem.Store) -> dict[str, list[tuple[Any, ...]]]:
    """The rows of every view, from the reference fold (:mod:`projections.replay`) of the log: the
    status runs seen after each event, each version's evidence with its event's source and trust,
    the open intervals and the edges."""
    events = list(store.log_store.indexed_events())
    by_index = dict(events)
    cells: dict[Any, Timeline] = {}
    runs: dict[tuple[str, int], list[list[Any]]] = {}  # (cell, vid) -> [status, from_index, to_index]
    for index, e in events:
        t = cells.setdefault(e.originator_id, Timeline(CellState(e.namespace, e.key)))
        t.apply(index, e)
        for v in t.state.versions:  # every version's status after this event, changed or not
            mine = runs.setdefault((e.originator_id.hex, v.vid), [])
            if not mine or mine[-1][0] != v.status:
                if mine:
                    mine[-1][2] = index
                mine.append([v.status, index, None])
    status = [(cid, vid, *run) for (cid, vid), mine in runs.items() for run in mine]
    evidence, intervals, edges = [], [], []
    for cid, t in cells.items():
        intervals += [(cid.hex, vid, o, c) for vid, spans in t.intervals.items() for o, c in spans]
        for v in t.state.versions:
            for revision in v.evidence:
                at = t.indices[revision - 1]
                evidence.append((cid.hex, v.vid, at, by_index[at].source, by_index[at].trust))
            created = t.indices[v.created_at - 1]
            if v.supersedes is not None:
                edges.append((cid.hex, "supersedes", v.vid, v.supersedes, created))
            if v.alternative_of is not None:
                edges.append((cid.hex, "alternative-of", v.vid, v.alternative_of, created))
    for index, e in events:
        if e.OP == "support":
            edges.append((e.originator_id.hex, "supported-by", e.target, index, index))
        elif e.OP == "revoke":
            edges.append((e.originator_id.hex, "revokes", index, e.target, index))
    return {"version_status": sorted(status, key=lambda r: r[:4]), "evidence": sorted(evidence, key=lambda r: r[:3]),
            "intervals": sorted(intervals, key=lambda r: r[:3]), "edges": sorted(edges, key=lambda r: r[:4])}


def test_every_view_equals_the_rows_of_the_reference_fold(backend: Backend) -> None:
    """``version_status``, ``evidence``, ``intervals`` and ``edges``, for random logs (revokes reopen
    superseded versions, so a version has several intervals), caught up in batches; on SQLite also
    after a rebuild, which swaps its tables in under the views."""

    @settings(max_examples=backend.max_examples(sqlite=100, postgres=20), deadline=None)
    @given(steps=st.lists(STEP, min_size=1, max_size=60), cuts=st.lists(st.integers(0, 60), max_size=3))
    @example(steps=REOPENS, cuts=[4])
    def check(steps: list[Step], cuts: list[int]) -> None:
        with pmem.open(backend.new_url()) as store:
            apply_in_batches(store, [as_op(s) for s in steps], cuts)
            store.catch_up()
            want = reference_views(store)
            got = {view: dump(store.projection_db)[view] for view in VIEWS}
            assert set(want) == set(VIEWS) and got == want
            if backend.name == "sqlite":
                store.rebuild("frontier")
                assert {view: dump(store.projection_db)[view] for view in VIEWS} == want

    check()


def test_the_reference_example_reopens_a_version(db: str) -> None:
    """The explicit example above has versions reopened (several intervals) and runs of several open
    statuses (one interval each), one of them still open."""
    with pmem.open(db) as store:
        store.apply([as_op(s) for s in REOPENS])
        store.catch_up()
        spans = store.projection_db.execute("SELECT vid, opened_at, closed_at FROM intervals ORDER BY vid, opened_at")
        # v0: active, superseded, active, contested, revoked; v2: alternative, active, superseded, active
        assert spans.fetchall() == [(0, 1, 2), (0, 3, 5), (1, 2, 3), (2, 4, 6), (2, 7, None), (3, 6, 7)]
        assert reference_views(store)["intervals"] == dump(store.projection_db)["intervals"]


def make_version(conn: Any, version: int) -> None:
    """Turn a stored projection into the layout schema ``version`` (2 or 3) wrote. Version 3:
    ``version_status`` and ``evidence`` as tables holding their rows (``version_status`` with its
    partial index on the open rows), no ``status_history`` nor ``evidence_events``, ``versions``
    without the current status and creating evidence, ``intervals`` and ``edges`` views over them.
    Version 2: ``intervals`` and ``edges`` as tables too (with ``intervals``' partial index), no views,
    no ``edge_events``."""
    kept = [*VIEWS] if version == 2 else ["version_status", "evidence"]
    for view in kept:
        conn.execute(f"CREATE TABLE {view}_old AS SELECT * FROM {view}")
    conn.execute("CREATE TABLE versions_old AS SELECT cell_id, vid, value, status, supersedes, alternative_of, "
                 "trust, support, sources, created_index FROM versions")
    for view in reversed(VIEWS):
        conn.execute(f"DROP VIEW {view}")
    for table in ("versions", "status_history", "evidence_events", *(["edge_events"] if version == 2 else [])):
        conn.execute(f"DROP TABLE {table}")
    for table in ("versions", *kept):
        conn.execute(f"ALTER TABLE {table}_old RENAME TO {table}")
    conn.execute("CREATE INDEX version_status_open ON version_status(cell_id, vid) WHERE to_index IS NULL")
    if version == 2:
        conn.execute("CREATE INDEX intervals_open ON intervals(cell_id, vid) WHERE closed_at IS NULL")
    else:
        for view in ("intervals", "edges"):  # the SQL of these two has not changed since version 3
            conn.execute(f"CREATE VIEW {view} AS {VIEWS[view]}")
    conn.execute(f"UPDATE {TRACKING} SET version = {version} WHERE name = 'frontier'")


@pytest.mark.parametrize("full_replay_from", [1, FrontierProjection.full_replay_from])
@pytest.mark.parametrize("version", [2, 3])
def test_a_stored_older_projection_is_replaced_by_the_current_schema_on_first_read(
        db: str, version: int, full_replay_from: int) -> None:
    """Its tables named like the views are dropped with the others (its views first) and the log
    replayed (by the rebuild's path from ``full_replay_from`` events on, where the backend offers it)."""
    with pmem.open(db) as store:
        write_log(store, 60, seed=4)
        store.catch_up()
        want = dump(store.projection_db)
        make_version(store.projection_db, version)
        views = {2: set(), 3: {"intervals", "edges"}}[version]
        assert store.projection_db.views() == views and "status_history" not in store.projection_db.names()
    with pmem.open(db) as store:
        store.frontier_projection.full_replay_from = full_replay_from
        assert store.stats()["projections"]["frontier"] == {"position": 0, "lag": 60, "versions": 0}
        store.frontier()
        assert dump(store.projection_db) == want
        assert store.projection_db.views() == set(VIEWS)
        assert not {"intervals_open", "version_status_open"} & store.projection_db.names()
        tracking = store.projection_db.execute(f"SELECT position, version FROM {TRACKING} WHERE name='frontier'")
        assert tracking.fetchall() == [(60, SCHEMA_VERSION)] and SCHEMA_VERSION == 4


def test_a_rebuild_swaps_its_tables_in_under_the_views(db_path: Path) -> None:
    """SQLite refuses ``ALTER TABLE ... RENAME`` while a view reads a dropped table: the swap drops the
    views and creates them again over the renamed tables. SQLite-only: the shadow-table path."""
    with pmem.open(db_path) as store:
        write_log(store, 200, seed=6)
        store.catch_up()
        conn = store.projection_db
        views = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'view' ORDER BY name").fetchall()
        assert [name for name, _ in views] == sorted(VIEWS)
        want = dump(conn)
        store.apply([{"op": "revoke", "key": f"k{k}"} for k in range(10)])  # rows the rebuild must bring
        assert store.frontier_projection.rebuild() == 210
        assert conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'view' ORDER BY name").fetchall() == views
        assert dump(conn) == dump(fresh_sqlite(store).conn) != want
        assert shadow_tables(conn) == []


class FailsInsideABatch(FrontierProjection):
    """A real projection whose ``fail_at``-th batch raises after writing part of its rows."""

    fail_at = 3

    def write(self, changes: Changes) -> None:
        self.fail_at -= 1
        if self.fail_at == 0:
            first = next(t for t, rows in changes.rows.items() if rows)
            self.conn.executemany(self.upsert_statement(first), changes.rows[first].values())
            raise RuntimeError("interrupted inside a batch")
        super().write(changes)


def write_log(store: pmem.Store, n: int, seed: int) -> None:
    rng = random.Random(seed)
    ops = [as_op((rng.choice(NAMESPACES), f"k{rng.randrange(40)}", rng.choice(
        ["accept", "accept", "contest", "reject", "revoke", "resolve", "support"]),
        rng.choice([None, "a", "b", "c", "d"]), rng.choice([30, 50, 80]), rng.choice([None, "s1"])))
        for _ in range(n)]
    store.apply(ops)


def test_an_error_inside_a_batch_rolls_back_its_rows_with_the_position_and_the_next_catch_up_resumes(
        backend: Backend, db: str) -> None:
    with pmem.open(db) as store:
        write_log(store, 200, seed=5)
        failing = FailsInsideABatch(store.projection_db, store.log_store, batch_size=30)
        try:
            failing.catch_up()
            raise AssertionError("the third batch should have raised")
        except RuntimeError:
            pass
        assert failing.position() == 60  # two batches committed, the third rolled back entirely
        assert dump(store.projection_db) == dump(fresh(backend, store, 60).conn)
        assert failing.catch_up() == 140  # the same object resumes: its cache was dropped
        assert dump(store.projection_db) == dump(fresh(backend, store).conn)


class LogBreaksAfter:
    """The real log, which raises as the rebuild is about to read its range after ``n`` (a crash
    mid-rebuild): the keys of each range are loaded through the log just before its rows are read."""

    def __init__(self, log: Any, n: int) -> None:
        self.log, self.n, self.reads = log, n, 0
        self.keys = log.keys  # the data keys sealed fields open with

    def load_keys(self, cells: Any) -> None:
        if self.reads == self.n:
            raise RuntimeError("interrupted mid-rebuild")
        self.reads += 1
        self.log.load_keys(cells)

    def last_index(self) -> int:
        return int(self.log.last_index())

    def indexed_events(self, start: int = 1, stop: int | None = None) -> Any:
        return self.log.indexed_events(start, stop)

    def rows(self, start: int, stop: int | None, limit: int) -> Any:
        return self.log.rows(start, stop, limit)

    def rows_of_cells(self, cells: Any, stop: int, ranges: int) -> Any:
        return self.log.rows_of_cells(cells, stop, ranges)


def shadow_tables(conn: Any) -> list[str]:
    return [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE name LIKE ?", (f"%{SHADOW}",))]


def test_a_rebuild_interrupted_midway_leaves_the_old_projection_whole_and_the_next_one_replaces_it(
        db_path: Path) -> None:
    with pmem.open(db_path) as store:
        store.frontier_projection.rebuild_chunk = 20
        write_log(store, 300, seed=3)
        store.catch_up()
        want = dump(store.projection_db)
        projection = store.frontier_projection
        log = projection.log
        projection.log = LogBreaksAfter(log, 7)  # of 15 ranges
        try:
            projection.rebuild()
            raise AssertionError("the rebuild should have raised")
        except RuntimeError:
            pass
        assert shadow_tables(store.projection_db) == []  # a failed rebuild drops the shadow tables it filled
        assert dump(store.projection_db) == want and projection.position() == 300
        store.apply([{"op": "accept", "key": "k1", "value": "new"}])
        assert store.get("k1").value == "new"  # the old projection still catches up and serves reads
        projection.log = log
        assert projection.rebuild() == 301
        assert shadow_tables(store.projection_db) == []
        assert dump(store.projection_db) == dump(fresh_sqlite(store).conn)


@pytest.mark.parametrize("full_replay_from", [1, FrontierProjection.full_replay_from])
def test_a_projection_written_by_another_schema_version_is_dropped_and_replayed(
        db: str, full_replay_from: int) -> None:
    """Replayed batch by batch, or (from ``full_replay_from`` events on, where the backend offers
    it) by the rebuild's path."""
    with pmem.open(db) as store:
        write_log(store, 50, seed=1)
        store.catch_up()
        want = dump(store.projection_db)
        store.projection_db.execute(f"UPDATE {TRACKING} SET version = version - 1")
    with pmem.open(db) as store:
        store.frontier_projection.full_replay_from = full_replay_from
        assert store.frontier_projection.position() == 0
        assert store.stats()["projections"]["frontier"] == {"position": 0, "lag": 50, "versions": 0}
        store.frontier()
        assert dump(store.projection_db) == want


CHILD = """
import sys, pmem
store = pmem.open(sys.argv[1], synchronous="NORMAL")
store.frontier_projection.batch_size = int(sys.argv[2])
print("ready", flush=True)
store.catch_up()
print("done", flush=True)
"""


@pytest.mark.slow  # several processes (the full suite runs it)
def test_a_catch_up_killed_mid_batch_resumes_with_no_event_applied_twice_or_skipped(
        backend: Backend) -> None:
    events = 3000
    seen = []
    for trial in range(4):
        path = backend.new_url(f"kill{trial}")
        with pmem.open(path) as store:
            write_log(store, events, seed=trial)
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(path), "5"], stdout=subprocess.PIPE,
                                 cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        time.sleep(random.Random(trial).uniform(0.05, 0.6))
        child.send_signal(signal.SIGKILL)
        child.wait()
        with pmem.open(path) as store:
            position = store.frontier_projection.position()
            seen.append(position)
            assert position % 5 == 0  # only whole batches were committed
            assert dump(store.projection_db) == dump(fresh(backend, store, position).conn)
            assert store.catch_up()["frontier"] == events - position
            assert dump(store.projection_db) == dump(fresh(backend, store).conn)
            tracking = store.projection_db.execute(f"SELECT * FROM {TRACKING} WHERE name='frontier'").fetchall()
            assert tracking == [("frontier", events, FrontierProjection.version)]
    assert any(0 < p < events for p in seen), f"no kill landed mid catch-up: {seen}"


VECTOR_CHILD = """
import sys, pmem
from pmem.adapters.readmodels.vector_projection import VectorProjection
store = pmem.open(sys.argv[1], synchronous="NORMAL")
projection = VectorProjection(store.log_store, chunk=int(sys.argv[2]))
print("ready", flush=True)
projection.catch_up()
print("done", flush=True)
"""


def vector_tables(conn: Any) -> list[list[tuple[Any, ...]]]:
    """The vector projection's rows: its position in the shared tracking table, its versions and intervals."""
    return [conn.execute(f"SELECT * FROM {TRACKING} WHERE name = ?", (VECTORS,)).fetchall(),
            *(sorted(conn.execute(f"SELECT * FROM {t}").fetchall()) for t in ("pmem_vec_versions",
                                                                             "pmem_vec_intervals"))]


@pytest.mark.slow  # several processes (the full suite runs it)
def test_a_vector_catch_up_killed_mid_batch_resumes_with_no_event_applied_twice_or_skipped(
        backend: Backend) -> None:
    from pmem.adapters.readmodels.vector_projection import VectorProjection
    from pmem.projections.vectors import open_versions

    events, seen = 2000, []
    for trial in range(3):
        path = backend.new_url(f"vkill{trial}")
        with pmem.open(path) as store:
            write_log(store, events, seed=trial)
        child = subprocess.Popen([sys.executable, "-c", VECTOR_CHILD, str(path), "5"], stdout=subprocess.PIPE,
                                 cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        time.sleep(random.Random(trial).uniform(0.05, 0.6))
        child.send_signal(signal.SIGKILL)
        child.wait()
        with pmem.open(path) as store:
            projection = VectorProjection(store.log_store)
            position = projection.position()
            seen.append(position)
            assert position % 5 == 0  # only whole batches were committed
            for ns in NAMESPACES:  # what was committed is exactly the fold of the first `position` events
                got = {(e.cell, e.vid) for e in projection.eligible(ns, position)}
                want = {(cid.hex, vid) for cid, vid in open_versions(store.log_store.indexed_events(1, position))
                        if store.log_store.cell_events([cid])[cid][0][1].namespace == ns}
                assert got == want
            assert projection.catch_up() == events
            resumed = vector_tables(store.projection_db)
            projection.reset()
            assert projection.catch_up() == events
            assert vector_tables(store.projection_db) == resumed  # equal to a replay from index 1
            projection.close()
    assert any(0 < p < events for p in seen), f"no kill landed mid catch-up: {seen}"


@pytest.mark.slow  # several processes (the full suite runs it)
def test_processes_catching_up_the_same_file_at_once_apply_each_event_exactly_once(
        backend: Backend) -> None:
    path = backend.new_url("shared")
    with pmem.open(path) as store:
        write_log(store, 2000, seed=9)
    children = [subprocess.Popen([sys.executable, "-c", CHILD, str(path), "3"], stdout=subprocess.PIPE,
                                 cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}) for _ in range(3)]
    for child in children:
        out, _ = child.communicate(timeout=120)
        assert child.returncode == 0 and out == b"ready\ndone\n"
    with pmem.open(path) as store:
        assert store.frontier_projection.position() == 2000
        assert dump(store.projection_db) == dump(fresh(backend, store).conn)


OPEN_AT = """
import sys, time, pmem
while time.time() < float(sys.argv[2]):
    time.sleep(0.0005)
with pmem.open(sys.argv[1]) as store:
    print(store.get("k").value, flush=True)
"""


@pytest.mark.slow  # several processes (the full suite runs it)
def test_processes_opening_a_store_at_once_all_set_up_its_projection(backend: Backend) -> None:
    """Each creates the tables under the write lock (a deferred transaction that read the schema
    could not upgrade to a write and would fail at once instead of waiting)."""
    from pmem.adapters.eventstore.eventlog import EventLog

    for trial in range(3):
        path = backend.new_url(f"open{trial}")
        log = EventLog(path)  # the log exists (and is in WAL mode); its projection does not yet
        log.close()
        start = time.time() + 1.0
        children = [subprocess.Popen([sys.executable, "-c", OPEN_AT, str(path), str(start)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
                                     env={**os.environ, "PYTHONPATH": str(ROOT)}) for _ in range(5)]
        for child in children:
            out, err = child.communicate(timeout=60)
            assert (child.returncode, out, err) == (0, b"None\n", b"")


def test_threads_sharing_one_store_read_while_another_writes(backend: Backend, db: str) -> None:
    import threading

    errors: list[BaseException] = []
    with pmem.open(db) as store:
        def read() -> None:
            try:
                for _ in range(100):
                    store.frontier()
                    store.get("k1", as_of=5, disclose=DISCLOSE)
            except BaseException as e:  # surfaced below
                errors.append(e)

        readers = [threading.Thread(target=read) for _ in range(3)]
        for t in readers:
            t.start()
        write_log(store, 300, seed=2)
        for t in readers:
            t.join()
        assert errors == []
        store.catch_up()
        assert dump(store.projection_db) == dump(fresh(backend, store).conn)
