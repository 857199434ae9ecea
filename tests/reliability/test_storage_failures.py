"""A full disk, a read-only database and an unreachable one, as a user of ``pmem`` meets them.

Each gives one JSON line on stderr naming what failed and where, exit code 1 (SPEC §9: the store
could not do what was asked; 2 is kept for bad input), and leaves the store as it was: the
integrity check passes, every acknowledged operation is there, nothing of the failed call is.
The full disk and the read-only file system are real: a small tmpfs, mounted for the test (we run
as root in CI; without the privilege those two tests skip and say why).

On PostgreSQL: an unreachable server (a closed port) and a read-only one (every session in
``default_transaction_read_only``, set through libpq's ``PGOPTIONS``, as a hot standby or a
read-only role refuses writes). A full disk stays SQLite-only: on PostgreSQL it would need a
tablespace on a tmpfs owned by the server's user and a cluster of its own per test, and what fails
there is the server's own write-ahead log, which PostgreSQL, not P-Mem, keeps sound.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import pmem
from tests.e2e.test_cli import error, lines, ok
from tests.e2e.test_cli import pmem as run_pmem
from tests.reliability.conftest import integrity_check, new_store_url

STORE_UNAVAILABLE = "store unavailable"


@contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    where.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.decode().strip()}): needs root")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


def remount(where: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(where)], check=True, capture_output=True)


def batch(prefix: str, n: int) -> bytes:
    text = "x" * 400  # the observation travels on every event: the disk fills in a few hundred batches
    return b"".join(json.dumps({"op": "accept", "key": f"k{i % 50}", "value": f"{prefix}-{i}", "text": text,
                                "op_id": f"{prefix}-{i}"}).encode() + b"\n" for i in range(n))


def logged_op_ids(db: Path) -> list[str]:
    with pmem.open(db) as store:
        return [e["op_id"] for e in store.log()]


def read_only_integrity(db: Path) -> str:
    """The integrity check without writing a byte (the file system may be full or read-only)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


def test_a_full_disk_fails_the_write_with_one_line_and_keeps_every_acknowledged_operation(
        tmp_path: Path) -> None:
    with tmpfs(tmp_path / "small", "1m") as mnt:
        db = mnt / "mem.db"
        acknowledged: list[str] = []
        failed: dict[str, Any] | None = None
        for n in range(1_000):
            r = run_pmem(db, "apply", "-", stdin=batch(f"b{n}", 200))
            if r.returncode != 0:
                failed, failed_batch = error(r), n
                assert r.returncode == 1, r.stderr
                break
            acknowledged += [x["op_id"] for x in lines(r.stdout)]
        assert failed is not None, "the disk never filled"
        assert failed["error"] == STORE_UNAVAILABLE and str(db) in failed["detail"], failed
        assert "full" in failed["detail"], failed
        assert read_only_integrity(db) == "ok"
        remount(mnt, "size=64m")  # space again: the store must be exactly as acknowledged
        assert logged_op_ids(db) == acknowledged
        ok(db, "apply", "-", stdin=batch(f"b{failed_batch}", 200))  # the failed batch, resent whole
        assert logged_op_ids(db) == acknowledged + [f"b{failed_batch}-{i}" for i in range(200)]
        with pmem.open(db) as store, pmem.open(db, reader="replay") as replay:
            assert integrity_check(store) == "ok"
            assert store.frontier(disclose=("history",)) == replay.frontier(disclose=("history",))


def test_a_full_disk_during_a_projection_catch_up_rolls_the_batch_back(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "small", "2m") as mnt:
        db = mnt / "mem.db"
        for n in range(1_000):  # the log fills the disk; the frontier projection was never caught up
            if run_pmem(db, "apply", "-", stdin=batch(f"b{n}", 200)).returncode != 0:
                break
        else:
            pytest.fail("the disk never filled")
        # the catch-up cannot write, so the read answers from the log (docs/reliability.md)
        answered = ok(db, "frontier")
        assert read_only_integrity(db) == "ok"
        remount(mnt, "size=64m")
        with pmem.open(db) as store, pmem.open(db, reader="replay") as replay:
            assert answered == ok(db, "frontier") and len(answered) == 50
            assert store.frontier(disclose=("history",)) == replay.frontier(disclose=("history",))
            assert integrity_check(store) == "ok"


def test_a_read_only_database_refuses_writes_with_one_line_and_stays_as_it_was(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "ro", "8m") as mnt:
        db = mnt / "mem.db"
        ok(db, "apply", "-", stdin=batch("a", 30))
        before = ok(db, "log")
        remount(mnt, "ro")
        for args in (("accept", "k1", "new"), ("apply", "-")):
            r = run_pmem(db, *args, stdin=batch("late", 3))
            err = error(r)
            assert r.returncode == 1 and err["error"] == STORE_UNAVAILABLE and str(db) in err["detail"], err
        r = run_pmem(db, "get", "k1")  # reading may work or fail, but never with a traceback
        if r.returncode != 0:
            assert r.returncode == 1 and error(r)["error"] == STORE_UNAVAILABLE
        remount(mnt, "rw")
        assert ok(db, "log") == before
        with pmem.open(db) as store:
            assert integrity_check(store) == "ok"


@pytest.mark.parametrize("args", [("accept", "k", "v"), ("get", "k"), ("stats",), ("worker", "--projection", "all")])
def test_a_store_in_a_missing_directory_is_a_one_line_error_and_creates_nothing(
        tmp_path: Path, args: tuple[str, ...]) -> None:
    db = tmp_path / "no" / "such" / "dir" / "mem.db"
    r = run_pmem(db, *args)
    err = error(r)
    assert r.returncode == 1 and err["error"] == STORE_UNAVAILABLE, err
    assert str(db.parent) in err["detail"] and "does not exist" in err["detail"], err
    assert not (tmp_path / "no").exists()


def test_a_file_that_is_not_a_store_is_a_one_line_error_and_is_left_untouched(tmp_path: Path) -> None:
    db = tmp_path / "notes.txt"
    db.write_bytes(b"not a database, just notes\n" * 100)
    before = db.read_bytes()
    r = run_pmem(db, "accept", "k", "v")
    err = error(r)
    assert r.returncode == 1 and err["error"] == STORE_UNAVAILABLE and str(db) in err["detail"], err
    assert db.read_bytes() == before


def test_a_directory_given_as_the_store_is_a_one_line_error(tmp_path: Path) -> None:
    r = run_pmem(tmp_path, "get", "k")
    err = error(r)
    assert r.returncode == 1 and err["error"] == STORE_UNAVAILABLE and str(tmp_path) in err["detail"], err


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)  # SQLite opens a file: no server to reach
@pytest.mark.parametrize("args", [("accept", "k", "v"), ("get", "k"), ("stats",), ("worker", "--projection", "all")])
def test_an_unreachable_postgresql_server_is_a_one_line_error_naming_the_url(
        backend: str, args: tuple[str, ...]) -> None:
    url = f"postgresql://pmem:secret@127.0.0.1:{closed_port()}/pmem"
    r = run_pmem(url, *args, env=dict(os.environ, POSTGRES_CONNECT_TIMEOUT="3"))
    err = error(r)
    assert r.returncode == 1 and err["error"] == STORE_UNAVAILABLE, err
    assert "postgresql://pmem:***@127.0.0.1" in err["detail"] and "secret" not in err["detail"], err


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)  # SQLite's case: the read-only file system above
def test_a_read_only_postgresql_server_refuses_writes_with_one_line_and_stays_as_it_was(
        backend: str, tmp_path: Path) -> None:
    db = new_store_url(backend, tmp_path)
    ok(db, "apply", "-", stdin=batch("a", 30))
    before = ok(db, "log")
    read_only = dict(os.environ, PGOPTIONS="-c default_transaction_read_only=on")
    for args in (("accept", "k1", "new"), ("apply", "-"), ("worker", "--projection", "all")):
        r = run_pmem(db, *args, stdin=batch("late", 3), env=read_only)
        err = error(r)
        assert r.returncode == 1 and err["error"] == STORE_UNAVAILABLE and "read-only" in err["detail"], err
    assert ok(db, "log") == before
    with pmem.open(db) as store:
        assert integrity_check(store) == "ok"
