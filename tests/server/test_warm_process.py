"""A server process freezes what is alive once it is warm (``http_runtime.WARM_REQUESTS`` answers), so the
cyclic collector stops rescanning the store's indexes and caches: in process, on a real SQLite store."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

import pmem
from pmem.adapters.servers.http_runtime import WARM_REQUESTS, Runtime


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Runtime]:
    db = str(tmp_path / "warm.db")
    with pmem.open(db, embedder="hashing") as store:
        store.accept("office.city", "Lisbon")
    rt = Runtime(db, insecure_local=True, settings={"embedder": "hashing"})
    rt.open()
    gc.unfreeze()
    yield rt
    rt.close()
    gc.unfreeze()  # the other tests run with a collector that scans everything again


def test_the_process_freezes_its_objects_once_after_the_warm_up_requests(runtime: Runtime) -> None:
    for _ in range(WARM_REQUESTS - 1):
        assert runtime.answer(None, lambda g: g.get("office.city")).status_code == 200
    assert gc.get_freeze_count() == 0
    assert runtime.answer(None, lambda g: g.get("office.city")).status_code == 200
    frozen = gc.get_freeze_count()
    assert frozen > 0
    kept = [runtime.answer(None, lambda g: g.get("office.city")) for _ in range(10)]  # objects made after it
    assert kept and gc.get_freeze_count() <= frozen  # frozen once: later objects stay collectable


def test_an_error_answer_does_not_count_towards_warmth(runtime: Runtime) -> None:
    for _ in range(WARM_REQUESTS):
        assert runtime.answer(None, lambda g: g.get("")).status_code == 400
    assert gc.get_freeze_count() == 0
