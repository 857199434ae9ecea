"""Reads from a read-only store whose projections lag answer from the log (issue 16, part 3, last bullet).

A real SQLite file on a real read-only file system (a tmpfs remounted ``ro``, as root; skipped without
the privilege): events appended after the last catch-up, then the medium made read-only. ``get``,
``history`` and ``frontier`` (API and CLI) answer exactly what a fold of the log (``reader="replay"``)
answered before, instead of failing. Before the fix the store did not even open ("unable to open
database file"). ``search`` and ``read`` need the event log itself and still fail with one line
(docs/reliability.md says so).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import pmem
from pmem.domain.errors import StoreUnavailable
from tests.e2e.test_cli import error, ok
from tests.e2e.test_cli import pmem as run_pmem
from tests.reliability.test_storage_failures import remount, tmpfs

pytestmark = [pytest.mark.reliability, pytest.mark.slow]


def answers(s: pmem.Store) -> dict[str, Any]:
    out: dict[str, Any] = {"frontier": s.frontier(disclose=["history"]), "frontier_b": s.frontier(namespace="B")}
    for key in ("k1", "k2", "k3", "never"):
        out[f"get {key}"] = s.get(key, disclose=["history", "alternatives"])
        out[f"history {key}"] = s.history(key)
        out[f"get {key} as of 3"] = s.get(key, as_of=3)
    return out


def test_a_lagging_read_only_store_answers_reads_from_the_log(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "ro", "16m") as mnt:
        db = mnt / "mem.db"
        with pmem.open(db, embedder="hashing") as s:
            s.accept("k1", "one")
            s.get("k1")  # the projections stop here
            s.accept("k1", "two")
            s.contest("k1", "deux", source="other")
            s.accept("k2", "kept")
            s.accept("k3", "b's", namespace="B")
            s.revoke("k2", "kept")
            assert s.stats()["projections"]["frontier"]["lag"] == 5
        with pmem.open(db, reader="replay", embedder="hashing") as s:
            want = answers(s)
        remount(mnt, "ro")
        try:
            with pmem.open(db, embedder="hashing") as s:
                assert answers(s) == want
                assert s.stats()["projections"]["frontier"]["lag"] == 5  # nothing was written
                with pytest.raises(StoreUnavailable):
                    s.accept("k9", "refused")
            assert [v["value"] for v in ok(db, "get", "k1")] == ["two"]
            assert [v["key"] for v in ok(db, "frontier")] == ["k1"]
            r = run_pmem(db, "search", "kept")
            assert r.returncode in (0, 1) and (r.returncode == 0 or error(r)["error"])
        finally:
            remount(mnt, "rw")
