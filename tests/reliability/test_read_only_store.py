"""Reads from a read-only store whose projections lag answer from the log, since they cannot be caught up there.

A real SQLite file on a real read-only file system (a tmpfs remounted ``ro``, as root; skipped without
the privilege), and a real PostgreSQL schema read in a read-only session: events appended after the
last catch-up, then the store made read-only. ``get``, ``history`` and ``frontier`` (API and CLI)
answer exactly what a fold of the log (``reader="replay"``) answered before, instead of failing.
Before the fix the store did not even open ("unable to open database file"; on PostgreSQL "cannot
execute CREATE SCHEMA in a read-only transaction"). ``search`` and ``read`` answer from the log too
(vector channel only): the cells, cosines and matched values a fresh writable store with the same
events ranks by cosine, as of an index and per namespace (before, they failed with one line: the
vector projection cannot be caught up there).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import pmem
from pmem.domain.errors import StoreUnavailable
from tests.e2e.test_cli import lines
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


SEARCHES: list[tuple[str, dict[str, Any]]] = [  # each query names one cell's value clearly
    ("two", {}), ("deux", {}), ("kept", {}), ("one", {"as_of": 1}), ("two", {"as_of": 1}),
    ("b's", {"namespace": "B"}), ("one", {"namespace": "B"}),
]


def searches(s: pmem.Store) -> dict[str, Any]:
    return {f"search {q} {kw}": [(r.cell, round(r.score, 5), r.matched) for r in s.search(q, ranking="vector", **kw)]
            for q, kw in SEARCHES}


def write(s: pmem.Store, *, pause: bool = False) -> None:
    s.accept("k1", "one")
    if pause:
        s.get("k1")  # the projections stop here (the search projections never started)
    s.accept("k1", "two")
    s.contest("k1", "deux", source="other")
    s.accept("k2", "kept")
    s.accept("k3", "b's", namespace="B")
    s.revoke("k2", "kept")


def lagging(db: str | Path, fresh: Path) -> dict[str, Any]:
    """Events after the last catch-up; what a fold of the log answers for them, and what a fresh
    writable store with the same events (its projections caught up) ranks first by cosine."""
    with pmem.open(db, embedder="hashing") as s:
        write(s, pause=True)
        assert s.stats()["projections"]["frontier"]["lag"] == 5
    with pmem.open(db, reader="replay", embedder="hashing") as s:
        want = answers(s)
    with pmem.open(fresh, embedder="hashing") as s:
        write(s)
        want |= searches(s)
    assert [c.key for c, _, _ in want["search two {}"]] == ["k1"]  # k2 was revoked: no open version
    assert want["search deux {}"][0][2] == "deux" and want["search one {'as_of': 1}"][0][2] == "one"
    assert [c.key for c, _, _ in want["search b's {'namespace': 'B'}"]] == ["k3"]
    return want


def read_only_reads(db: str | Path, want: dict[str, Any], env: dict[str, str] | None = None) -> None:
    with pmem.open(db, embedder="hashing") as s:
        assert answers(s) | searches(s) == want
        assert "k1 = two" in s.read("what is two?").context
        assert s.read("what is b's?", namespace="B").items == ("k3",)
        assert s.stats()["projections"]["frontier"]["lag"] == 5  # nothing was written
        with pytest.raises(StoreUnavailable):
            s.accept("k9", "refused")
    assert [v["value"] for v in ok(db, "get", "k1", env=env)] == ["two"]
    assert [v["key"] for v in ok(db, "frontier", env=env)] == ["k1"]
    assert [v["key"] for v in ok(db, "search", "two", env=env)] == ["k1"]


def test_a_lagging_read_only_sqlite_file_answers_reads_from_the_log(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "ro", "16m") as mnt:
        db = mnt / "mem.db"
        want = lagging(db, tmp_path / "fresh.db")
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
    want = lagging(db, tmp_path / "fresh.db")
    monkeypatch.setenv("PGOPTIONS", "-c default_transaction_read_only=on")
    read_only_reads(db, want, env=dict(os.environ))


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_a_search_whose_frontier_is_caught_up_but_whose_search_projections_lag_answers_from_the_log(
        backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The frontier is caught up, the search projections were never built: search cannot write them on
    a read-only store, so it answers from the log, as a fresh writable store ranks by the vector channel."""
    db = new_store_url(backend, tmp_path)
    with pmem.open(db, embedder="hashing") as s:
        write(s)
        s.get("k1")
    with pmem.open(tmp_path / "fresh.db", embedder="hashing") as s:
        write(s)
        want = searches(s)
    assert [c.key for c, _, _ in want["search two {}"]] == ["k1"]
    monkeypatch.setenv("PGOPTIONS", "-c default_transaction_read_only=on")
    with pmem.open(db, embedder="hashing") as s:
        assert s.get("k1").value == "two" and s.stats()["projections"]["frontier"]["lag"] == 0
        assert searches(s) == want
