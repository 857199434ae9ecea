"""Reads from a read-only store whose projections lag answer from the log (issue 16, part 3, last bullet).

A real SQLite file on a real read-only file system (a tmpfs remounted ``ro``, as root; skipped without
the privilege), and a real PostgreSQL schema read in a read-only session: events appended after the
last catch-up, then the store made read-only. ``get``, ``history`` and ``frontier`` (API and CLI)
answer exactly what a fold of the log (``reader="replay"``) answered before, instead of failing.
Before the fix the store did not even open ("unable to open database file"; on PostgreSQL "cannot
execute CREATE SCHEMA in a read-only transaction"). ``search`` and ``read`` need the vector tables
and still fail with one line where they cannot be written (docs/reliability.md says so).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import pmem
from pmem.domain.errors import StoreUnavailable
from tests.e2e.test_cli import error, lines
from tests.e2e.test_cli import pmem as run_pmem
from tests.reliability.conftest import new_store_url
from tests.reliability.test_storage_failures import remount, tmpfs

pytestmark = [pytest.mark.reliability, pytest.mark.slow]


def ok(db: str | Path, *args: str, env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    r = run_pmem(db, *args, env=env)
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    return lines(r.stdout)


def answers(s: pmem.Store) -> dict[str, Any]:
    out: dict[str, Any] = {"frontier": s.frontier(disclose=["history"]), "frontier_b": s.frontier(namespace="B")}
    for key in ("k1", "k2", "k3", "never"):
        out[f"get {key}"] = s.get(key, disclose=["history", "alternatives"])
        out[f"history {key}"] = s.history(key)
        out[f"get {key} as of 3"] = s.get(key, as_of=3)
    return out


def lagging(db: str | Path) -> dict[str, Any]:
    """Events after the last catch-up; what a fold of the log answers for them."""
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
        return answers(s)


def read_only_reads(db: str | Path, want: dict[str, Any], env: dict[str, str] | None = None) -> None:
    with pmem.open(db, embedder="hashing") as s:
        assert answers(s) == want
        assert s.stats()["projections"]["frontier"]["lag"] == 5  # nothing was written
        with pytest.raises(StoreUnavailable):
            s.accept("k9", "refused")
    assert [v["value"] for v in ok(db, "get", "k1", env=env)] == ["two"]
    assert [v["key"] for v in ok(db, "frontier", env=env)] == ["k1"]
    r = run_pmem(db, "search", "kept", env=env)
    assert r.returncode in (0, 1) and (r.returncode == 0 or error(r)["error"])


def test_a_lagging_read_only_sqlite_file_answers_reads_from_the_log(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "ro", "16m") as mnt:
        db = mnt / "mem.db"
        want = lagging(db)
        remount(mnt, "ro")
        try:
            read_only_reads(db, want)
        finally:
            remount(mnt, "rw")


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)  # the SQLite case above is a file system
def test_a_lagging_store_in_a_read_only_postgresql_session_answers_reads_from_the_log(
        backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A standby, or a role made read-only with ``ALTER ROLE ... SET default_transaction_read_only``."""
    db = new_store_url(backend, tmp_path)
    want = lagging(db)
    monkeypatch.setenv("PGOPTIONS", "-c default_transaction_read_only=on")
    read_only_reads(db, want, env=dict(os.environ))
