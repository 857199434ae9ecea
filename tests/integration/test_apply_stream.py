"""``Store.apply_stream``: a batch given in chunks is one atomic batch (both backends)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import pmem
from pmem.adapters.eventstore import sealing, sqlite_log
from pmem.domain.errors import InvalidBatch
from pmem.domain.operations import Evidence, Operation
from tests.conftest import Backend


def _chunk(start: int, n: int, op_id: bool = True) -> list[Operation]:
    return [Operation("accept", "default", f"k{i % 50}", f"v{i}", Evidence(op_id=f"o{i}" if op_id else None))
            for i in range(start, start + n)]


def test_chunks_are_one_batch_and_a_failing_chunk_source_writes_nothing(store: pmem.Store) -> None:
    store.apply(_chunk(0, 2))

    def chunks() -> Iterator[list[Operation]]:
        yield _chunk(2, 300)
        yield _chunk(302, 300)
        raise InvalidBatch("missing 'value'", line=601, field="value")

    got: list[pmem.Receipt] = []
    with pytest.raises(InvalidBatch, match="line 601"):
        store.apply_stream(chunks(), got.extend)
    assert store.last_index() == 2  # the 600 operations of the first two chunks were rolled back
    assert store.apply(_chunk(2, 1))[0].event_index == 3  # and the indices have no gap


def test_a_bad_operation_in_a_later_chunk_is_named_by_its_place_in_the_whole_batch(store: pmem.Store) -> None:
    bad = Operation("accept", "default", "k", None)
    with pytest.raises(InvalidBatch, match="line 12"):
        store.apply_stream(iter([_chunk(0, 10), [*_chunk(10, 1), bad]]), lambda _: None)
    assert store.last_index() == 0


def test_receipts_match_one_apply_and_repeats_across_chunks_are_duplicates(store: pmem.Store) -> None:
    got: list[pmem.Receipt] = []
    assert store.apply_stream(iter([_chunk(0, 100), [], _chunk(0, 5)]), got.extend) == 105
    assert [r.duplicate for r in got] == [False] * 100 + [True] * 5
    assert got[100:] == [r._replace(duplicate=True) for r in got[:5]]
    assert store.apply_stream(iter([]), got.extend) == 0


def test_a_rolled_back_batch_leaves_no_data_key_of_its_new_cells_cached(store: pmem.Store) -> None:
    def chunks() -> Iterator[list[Operation]]:
        yield _chunk(0, 60, op_id=False)  # 50 new cells, each given a data key inside the batch
        raise InvalidBatch("missing 'value'", line=61, field="value")

    with pytest.raises(InvalidBatch):
        store.apply_stream(chunks(), lambda _: None)
    store.apply(_chunk(100, 50, op_id=False))  # the same cells again: they need keys that are stored
    sealing.CACHE.clear()  # as a new process: only the stored keys open the stored values
    assert [store.get(f"k{i}").value for i in range(50)] == [f"v{i}" for i in range(100, 150)]


def test_cells_held_between_chunks_are_bounded_by_their_count(store: pmem.Store, backend: Backend) -> None:
    chunks = [_chunk(n * 100, 100) for n in range(6)]  # 50 cells, 2 events each per chunk
    with pmem.open(backend.new_url()) as one:
        expected = [r.to_dict() for r in one.apply([op for c in chunks for op in c])]
    store.log_store.stream_cached_cells = 40  # the log's bound, set low: the 50 cells are let go after each chunk
    got: list[pmem.Receipt] = []
    store.apply_stream(iter(chunks), got.extend)
    assert [r.to_dict() for r in got] == expected  # cells dropped and read again decide the same
    assert not store.log_store._cells


def test_cells_held_between_batches_keep_only_their_open_versions(store: pmem.Store) -> None:
    store.apply_stream(iter([_chunk(n * 100, 100, op_id=False) for n in range(10)]), lambda _: None)
    store.apply([Operation("contest", "default", "k3", "other", Evidence())])
    held = {k[1]: cell.state for k, (cell, _) in store.log_store._cells.items()}
    assert len(held) == 50 and all(len(s.versions) == 20 for k, s in held.items() if k != "k3")
    assert all(len(s.versions.held) == 1 for k, s in held.items() if k != "k3")  # the head: not 20 versions
    assert sorted(v.value for v in held["k3"].versions) == ["other", "v953"]  # head and its alternative


def test_a_streamed_batch_writes_through_a_small_page_cache_and_then_restores_it(db_path: Path) -> None:
    with pmem.open(db_path) as store:
        recorder = store.log_store.recorder

        def cache_size() -> int:
            with recorder._tx(commit=False) as c:
                c.execute("PRAGMA cache_size")
                return int(c.fetchone()[0])

        during: list[int] = []
        store.apply_stream(iter([_chunk(0, 10)]), lambda _: during.append(cache_size()))
        assert during == [-sqlite_log.STREAM_CACHE_KIB]  # a batch of any size: memory bounded by a chunk
        assert cache_size() == -sqlite_log.CACHE_KIB  # reads keep the large one
        assert store.get("k3").value == "v3"


def _mixed(start: int, n: int) -> list[Operation]:
    """Every kind of operation over 40 keys, so packed cells carry alternatives, support and rollbacks."""
    kinds = ("accept", "contest", "support", "accept", "reject", "revoke", "contest", "resolve")
    ops = []
    for i in range(start, start + n):
        kind = kinds[(i // 40) % len(kinds)]
        value = None if kind == "revoke" else f"v{i % 3}"
        ops.append(Operation(kind, "default", f"m{i % 40}", value, Evidence(trust=30 + i % 50, source=f"s{i % 4}")))
    return ops


def _observed(chunks: list[list[Operation]], look: Callable[[], None]) -> Iterator[list[Operation]]:
    """The chunks, calling ``look`` after each has been recorded (the stream asks for the next chunk, or
    for the end, only once the one before is written)."""
    for n, chunk in enumerate(chunks):
        if n:
            look()
        yield chunk
    look()


def _probed(chunks: list[list[Operation]], look: Callable[[], None]) -> Iterator[list[Operation]]:
    """The chunks with a one-operation chunk on a cell of its own between each two, calling ``look`` once
    that probe has run: the stream bounds its cells when it has the next chunk in hand, before running
    it, and the probe unpacks none of them, so ``look`` sees what the bound packed."""
    for n, chunk in enumerate(chunks):
        if n:
            yield [Operation("accept", "default", "probe", "p", Evidence())]
            look()
        yield chunk


# every cell kept between chunks; or all let go, their records kept; or those too, stored and read again
@pytest.mark.parametrize(("cells_held", "records_kept"), [(1000, 1000), (10, 1000), (10, 10)])
def test_cells_held_or_read_again_between_chunks_decide_as_one_batch(store: pmem.Store, backend: Backend,
                                                                       cells_held: int, records_kept: int) -> None:
    chunks = [_mixed(n * 80, 80) for n in range(12)]
    with pmem.open(backend.new_url()) as one:
        expected = [r.to_dict() for r in one.apply([op for c in _probed(chunks, lambda: None) for op in c])]
        expected_log = [{k: v for k, v in e.items() if k != "recorded_at"} for e in one.log()]
        expected_cells = {c.key: (c.value, c.status, c.alternatives) for c in one.frontier()}
    log = store.log_store
    log.stream_cached_cells, log.stream_packed_cells = cells_held, records_kept
    held_seen: list[int] = []  # the cells held between each chunk and the next
    got: list[pmem.Receipt] = []
    store.apply_stream(_probed(chunks, lambda: held_seen.append(len(log._cells))), got.extend)
    assert [r.to_dict() for r in got] == expected
    assert [{k: v for k, v in e.items() if k != "recorded_at"} for e in store.log()] == expected_log
    assert {c.key: (c.value, c.status, c.alternatives) for c in store.frontier()} == expected_cells
    assert set(held_seen) == ({41} if cells_held > 41 else {1})  # all held; or let go, the probe's alone
    assert log.state_mismatches() == []  # the records and chains stored are those folded from the log
    assert not log._held.states and not log.keys.unstored  # nothing held back past the batch


def test_a_rolled_back_batch_leaves_no_cell_state(store: pmem.Store) -> None:
    log = store.log_store
    log.stream_cached_cells, log.stream_packed_cells = 10, 10

    def chunks() -> Iterator[list[Operation]]:
        yield _mixed(0, 80)
        assert log.recorder.states.counts() == (0, 0)  # the records held back ...
        yield [Operation("accept", "default", "elsewhere", "v", Evidence())]
        assert log.recorder.states.counts() == (40, 1)  # ... until more were kept than the bound: stored
        raise InvalidBatch("missing 'value'", line=161, field="value")

    with pytest.raises(InvalidBatch):
        store.apply_stream(chunks(), lambda _: None)
    assert not log._cells and log.recorder.states.counts() == (0, 0)
    assert not log._held.states and not log.keys.unstored
    assert store.last_index() == 0


def test_a_streamed_resend_gives_each_operation_its_first_receipt_whatever_the_chunk_order(store: pmem.Store) -> None:
    chunks = [[op._replace(evidence=op.evidence._replace(op_id=f"r{n}-{i}")) for i, op in enumerate(_mixed(n * 80, 80))]
              for n in range(6)]
    first: list[pmem.Receipt] = []
    store.apply_stream(iter(chunks), first.extend)
    log = store.log_store
    folds_seen: list[int] = []  # the cells whose fold was kept, after each chunk
    for order in (chunks, chunks[::-1], [chunks[2], chunks[0], chunks[2], chunks[5]]):
        again: list[pmem.Receipt] = []
        store.apply_stream(_observed(order, lambda: folds_seen.append(len(log._folds))), again.extend)
        by_op_id = {r.op_id: r for r in first}
        assert again == [by_op_id[op.evidence.op_id]._replace(duplicate=True) for c in order for op in c]
    assert store.last_index() == len(first)  # a resend appends nothing
    assert max(folds_seen) == 40  # every cell's fold was kept between chunks (and used, or begun again)
    assert len(log._folds) == 0  # and only inside its batch
