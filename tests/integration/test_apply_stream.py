"""``Store.apply_stream``: a batch given in chunks is one atomic batch (both backends)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import pmem
from pmem.domain.errors import InvalidBatch
from pmem.domain.operations import Evidence, Operation


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
