"""The compact cell state (``adapters.eventstore.cell_state``): writes decided on it are those decided on
the whole history, on both backends, and a store made before it gets it built from its log on open."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import pmem
from pmem.domain.operations import Evidence, Operation
from tests.conftest import ROOT, Backend

EDITION1 = ROOT / "tests" / "data" / "edition1_store" / "store.sqlite3"


def _op(kind: str, key: str, value: str | None, trust: int = 50, source: str | None = None) -> Operation:
    return Operation(kind, "default", key, value, Evidence(trust=trust, source=source))


def _long_history(n: int) -> list[Operation]:
    """``n`` values of one cell: accepts, with every tenth a reject (its displaced head can never come back)."""
    return [_op("reject", "a", f"r{i}") if i % 10 == 9 else _op("accept", "a", f"v{i}") for i in range(n)]


def _heads_folded_from_the_log(store: pmem.Store, receipts: list[pmem.Receipt]) -> list[object]:
    """Each receipt's head as the whole history folded up to its event gives it (the state tables unused)."""
    return [store.log_store.receipt_at(r.event_index).head for r in receipts]


def test_a_long_revoke_walk_reinstates_each_value_displaced_before(db: str) -> None:
    with pmem.open(db) as store:
        history = _long_history(300)
        for start in range(0, 300, 100):
            store.apply(history[start:start + 100])
    with pmem.open(db) as store:  # a new store object: the cell is read from the state table
        walked = store.apply([_op("revoke", "a", None)] * 100)
        walked += [store.apply([_op("revoke", "a", None)])[0] for _ in range(180)]
        assert [r.head for r in walked] == _heads_folded_from_the_log(store, walked)
        # the head r299 goes, then every value displaced by the next one comes back, newest first, but
        # the 30 that a reject displaced (contradicted): 300 - 1 - 30 = 269 heads, then the cell is empty
        heads = [r.head.value for r in walked if r.head is not None]
        assert heads[:3] == ["v297", "v296", "v295"] and heads[-2:] == ["v1", "v0"] and len(heads) == 269
        assert "v288" not in heads and "r289" in heads
        assert [r.applied for r in walked] == [True] * 270 + [False] * 10  # then "revoke needs a head"
        assert store.log_store.state_mismatches() == []
        assert store.apply([_op("accept", "a", "again")])[0].head == pmem.Head("again", "active")


def test_rollbacks_after_revokes_and_accepts_in_one_batch_read_as_many_chain_rows_as_they_need(db: str) -> None:
    with pmem.open(db) as store:
        store.apply(_long_history(50))
    ops = [_op("revoke", "a", None), _op("reject", "a", None), _op("accept", "a", "new"),
           _op("revoke", "a", None), _op("revoke", "a", None), _op("revoke", "a", None)]
    with pmem.open(db) as store:
        got = store.apply(ops)
        assert [r.head for r in got] == _heads_folded_from_the_log(store, got)
        assert store.log_store.state_mismatches() == []


def _mixed(n: int, start: int = 0) -> list[Operation]:
    """Every kind of operation over 30 keys, with trusts that lower some accepts into contests."""
    kinds = ("accept", "contest", "support", "accept", "reject", "revoke", "accept", "resolve", "revoke", "reject")
    ops = []
    for i in range(start, start + n):
        kind = kinds[(i // 30) % len(kinds)]
        value = None if kind == "revoke" or (kind == "reject" and i % 3 == 0) else f"v{i % 4}"
        ops.append(_op(kind, f"m{i % 30}", value, trust=30 + (i * 7) % 50, source=f"s{i % 3}"))
    return ops


def test_the_state_written_with_each_batch_is_the_state_folded_from_the_log(store: pmem.Store) -> None:
    for n in range(8):
        store.apply(_mixed(150, n * 150))
        if n % 2:
            store.log_store._drop_cells()  # read again from the state table
    store.forget("m3")
    store.apply([_op("accept", "m3", "after"), _op("accept", "m3", "later"), _op("revoke", "m3", None)])
    assert store.log_store.state_mismatches() == []
    assert store.get("m3").value == "after"


def test_a_forget_leaves_no_chain_row_of_the_cell(store: pmem.Store) -> None:
    store.apply(_long_history(20))
    recorder = store.log_store.recorder
    hexid = next(iter(store.log_store._cells.values()))[1]
    start = store.log_store._cells[("default", "a")][0].state.head.supersedes
    assert len(recorder.states.chain([(hexid, start, 100)])) == 17  # 20 values, 2 contradicted, the head
    store.forget("a")
    assert recorder.states.chain([(hexid, start, 100)]) == []
    assert store.log_store.state_mismatches() == []


def _drop_state(store: pmem.Store) -> None:
    """Empty the state tables, as a store written before them had none."""
    recorder = store.log_store.recorder
    with recorder._tx(commit=True) as c:
        for table in (recorder.sql.chain, recorder.sql.cells, recorder.sql.state_at):
            c.execute(f"DELETE FROM {table}")


def test_a_store_without_the_state_gets_it_from_its_log_on_open_and_writes_the_same(backend: Backend) -> None:
    old, new = backend.new_url(), backend.new_url()
    for url in (old, new):
        with pmem.open(url) as store:
            store.apply(_mixed(300) + _long_history(40))
    with pmem.open(old) as store:
        _drop_state(store)
        assert store.log_store.recorder.states.counts() == (0, 0)
    then = _mixed(300, 300) + [_op("revoke", "a", None)] * 5
    with pmem.open(old) as migrated, pmem.open(new) as kept:
        assert migrated.log_store.recorder.states.counts() == (31, 1)
        assert migrated.log_store.state_mismatches() == []
        assert [r.to_dict() for r in migrated.apply(then)] == [r.to_dict() for r in kept.apply(then)]


def test_the_previous_release_s_store_opens_with_its_state_built_and_reads_and_writes_as_before(tmp_path: Path) -> None:
    db = tmp_path / "store.sqlite3"
    shutil.copy(EDITION1, db)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name='pmem_cells'").fetchone()[0] == 0
    with pmem.open(db) as store:
        before = {c.key: (c.value, c.status, c.alternatives) for c in store.frontier()}
        cells, _ = store.log_store.recorder.states.counts()
        assert cells >= len(before) > 0 and store.log_store.state_mismatches() == []
        key = next(iter(before))
        got = store.apply([_op("accept", key, "fresh"), _op("revoke", key, None), _op("revoke", key, None)])
        assert [r.head for r in got] == _heads_folded_from_the_log(store, got)
        assert store.log_store.state_mismatches() == []


@contextmanager
def keeping_no_state(store: pmem.Store) -> Iterator[None]:
    """Writes through ``store`` append their events as a release that keeps no cell state did."""
    recorder = store.log_store.recorder
    real = recorder.insert_rows
    recorder.insert_rows = lambda rows, count, op_ids=(), keys=(), forgetting=None, states=None: real(
        rows, count, op_ids, keys, forgetting)
    try:
        yield
    finally:
        recorder.insert_rows = real


def _kept_heads(store: pmem.Store, ops: list[Operation]) -> list[object]:
    got = store.apply(ops)
    assert [r.head for r in got] == _heads_folded_from_the_log(store, got)
    return [r.head for r in got]


def test_events_appended_without_the_state_are_noticed_on_open_and_the_state_rebuilt(db: str) -> None:
    with pmem.open(db) as store:
        store.apply(_long_history(12) + [_op("accept", "b", "b0")])
    with pmem.open(db) as old, keeping_no_state(old):
        old.apply([_op("accept", "a", "late"), _op("revoke", "b", None), _op("accept", "c", "c0")])
        position, last = old.log_store.state_position()
        assert (position, last) == (13, 16)  # the state stays where the last write that kept it left it
    with pmem.open(db) as store:
        assert store.log_store.state_position() == (16, 16) and store.log_store.state_mismatches() == []
        assert store.log_store.state_counts() == (3, 1)
        assert _kept_heads(store, [_op("revoke", "a", None), _op("accept", "b", "b1"), _op("revoke", "c", None)]) == [
            pmem.Head("v11", "active"), pmem.Head("b1", "active"), None]


def test_a_write_after_one_that_kept_no_state_leaves_the_state_behind_and_a_reopen_rebuilds_it(db: str) -> None:
    with pmem.open(db) as store, pmem.open(db) as old:
        store.apply([_op("accept", "a", "a0"), _op("accept", "b", "b0")])
        with keeping_no_state(old):
            old.apply([_op("accept", "b", "b1")])
        store.apply([_op("accept", "a", "a1")])  # another cell: no conflict, but the state is not the log's
        assert store.log_store.state_position() == (2, 4)
    with pmem.open(db) as store:
        assert store.log_store.state_position() == (4, 4) and store.log_store.state_mismatches() == []


@pytest.mark.parametrize("streamed", [False, True])
def test_an_open_store_writing_a_cell_another_release_wrote_rebuilds_the_state_and_decides_on_the_log(
        db: str, streamed: bool) -> None:
    with pmem.open(db) as store, pmem.open(db) as old:
        store.apply(_long_history(5))  # cached in this store, and in the state table
        with keeping_no_state(old):
            old.apply([_op("accept", "a", "late"), _op("accept", "a", "later")])
        ops = [_op("revoke", "a", None), _op("revoke", "a", None)]
        if streamed:
            got: list[pmem.Receipt] = []
            store.log_store.execute_stream([ops], got.extend)
        else:
            got = store.apply(ops)
        assert [r.head for r in got] == _heads_folded_from_the_log(store, got) == [
            pmem.Head("late", "active"), pmem.Head("v4", "active")]
        assert store.log_store.state_position() == (9, 9) and store.log_store.state_mismatches() == []


@pytest.mark.parametrize("rows", [1, 3])
def test_a_chain_read_stops_at_the_rows_asked_for(store: pmem.Store, rows: int) -> None:
    store.apply([_op("accept", "c", f"x{i}") for i in range(6)])
    hexid = store.log_store._cells[("default", "c")][1]
    start = store.log_store._cells[("default", "c")][0].state.head.supersedes
    assert [r[1] for r in store.log_store.recorder.states.chain([(hexid, start, rows)])] == [4, 3, 2][:rows]


def test_rollbacks_on_more_cells_than_one_chain_query_reads_are_decided_on_their_chains(store: pmem.Store) -> None:
    store.apply([_op("accept", f"w{i}", f"x{j}") for j in range(3) for i in range(700)])
    store.log_store._drop_cells()
    got = store.apply([_op("revoke", f"w{i}", None) for i in range(700)])
    assert {r.head for r in got} == {pmem.Head("x1", "active")} and store.log_store.state_mismatches() == []


def test_a_chain_row_taken_by_another_writer_between_the_reads_is_a_conflict_decided_again(db: str) -> None:
    with pmem.open(db) as store, pmem.open(db) as other:
        store.apply(_long_history(8))  # head v7 over v6, v5, ...
        log = store.log_store
        real = log.recorder.states.chain

        def racing(starts: list[tuple[str, int, int]]) -> list[object]:
            log.recorder.states.chain = real  # once: as if the other writer committed between the two reads
            other.apply([_op("revoke", "a", None), _op("reject", "a", None)])  # v6 back, then contradicted
            return real(starts)

        log._drop_cells()
        log.recorder.states.chain = racing
        got = store.apply([_op("revoke", "a", None)])[0]
        assert got.head == log.receipt_at(got.event_index).head == pmem.Head("v4", "active")
        assert got.event_index == 11 and log.state_mismatches() == []
