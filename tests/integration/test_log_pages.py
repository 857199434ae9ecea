"""``Store.log`` reads its events a page at a time (a page as big as the limit, doubling while other
namespaces' events fill it): on real stores (SQLite and PostgreSQL), whatever the limit and however many
other namespaces' events lie between, it returns the same events as reading the whole log and filtering."""

from __future__ import annotations

import pytest

import pmem

RUNS = [("a", 3), ("b", 700), ("a", 2), ("b", 1300), ("a", 4)]  # namespace a's 9 events among b's 2,000


@pytest.fixture
def interleaved(db: str) -> pmem.Store:
    store = pmem.open(db, namespace="a")
    store.apply([{"op": "accept", "namespace": ns, "key": f"{ns}{n}-{i}", "value": "v"}
                 for n, (ns, count) in enumerate(RUNS) for i in range(count)])
    return store


@pytest.mark.parametrize("limit", [1, 2, 3, 5, 9, 100, None])
def test_a_limited_log_of_one_namespace_is_the_filtered_whole_log(interleaved: pmem.Store, limit: int | None) -> None:
    with interleaved as store:
        whole = [e["event_index"] for e in store.log()]
        assert whole == [1, 2, 3, 704, 705, 2006, 2007, 2008, 2009]
        for after in (0, 2, 3, 704, 2009):
            got = [e["event_index"] for e in store.log(after=after, limit=limit)]
            expected = [i for i in whole if i > after]
            assert got == (expected if limit is None else expected[:limit]), (after, limit)
