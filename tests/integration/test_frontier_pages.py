"""``Store.frontier(after=, limit=)``: a page read from the store a page of keys at a time (the inspector's
first render and ``/v1/frontier``), on both backends and from a fold of the log: paging through it gives
the whole frontier, in order, at every ``as_of``, without empty cells."""

from __future__ import annotations

from typing import Any

import pytest

import pmem
from pmem.domain.errors import InvalidOperation


def write(store: Any) -> None:
    store.apply([{"op": "accept", "key": f"k{i:03d}.v", "value": f"v{i}"} for i in range(150)])
    for i in range(0, 150, 4):
        store.revoke(f"k{i:03d}.v")  # empty cells the pages must skip
    for i in range(1, 150, 9):
        store.contest(f"k{i:03d}.v", "other")


def paged(store: Any, limit: int, **kw: Any) -> list[Any]:
    out, after = [], None
    while True:
        page = store.frontier(after=after, limit=limit, **kw)
        assert len(page) <= limit
        out += page
        if len(page) < limit:
            return out
        after = page[-1].key


def test_paging_the_frontier_gives_the_whole_frontier(db: str) -> None:
    with pmem.open(db, embedder="hashing") as store:
        write(store)
        for as_of in (None, 120, store.last_index() - 5, 3):
            whole = [c.to_dict() for c in store.frontier(as_of=as_of)]
            for limit in (1, 7, 50, 1000):
                assert [c.to_dict() for c in paged(store, limit, as_of=as_of)] == whole, (as_of, limit)
        assert [c.key for c in store.frontier(after="k100", limit=3)] == ["k101.v", "k102.v", "k103.v"]
        assert all(c.value is not None for c in store.frontier(limit=200))
        assert store.frontier(after="k149.v", limit=5) == []
        with pytest.raises(InvalidOperation, match="limit"):
            store.frontier(limit=0)


def test_the_replay_reader_pages_a_fold_of_the_log(tmp_path: Any) -> None:
    db = str(tmp_path / "lag.db")
    with pmem.open(db, embedder="hashing") as store:
        write(store)
        whole = [c.to_dict() for c in store.frontier()]
    with pmem.open(db, embedder="hashing", reader="replay") as store:  # the log folded, no projection
        assert [c.to_dict() for c in paged(store, 11)] == whole
