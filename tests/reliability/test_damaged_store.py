"""A store with one damaged page refuses writes: a write acknowledged into a damaged file could be lost,
so none is accepted until the store is repaired.

A real SQLite file, closed, then one page in the middle of it overwritten with garbage, as a bad disk,
a bad copy or a stray tool would leave it. Before its first write an open store runs ``PRAGMA
quick_check`` (:func:`pmem.adapters.service.doctor.refuse_damaged`): the write is refused with one line
naming the store and ``pmem doctor``, exit 1, and not one byte is appended. ``pmem doctor`` then fails
its integrity check and names a repair. SQLite only: PostgreSQL keeps its own files.
"""

from __future__ import annotations

import os
import random
import sqlite3
from pathlib import Path

import pytest

import pmem
from tests.e2e.test_cli import error, lines, ok
from tests.e2e.test_cli import pmem as run_pmem

PAGE = 4096


def quick_check(db: Path) -> str:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return " ".join(str(r[0]) for r in conn.execute("PRAGMA quick_check").fetchall())
    except sqlite3.DatabaseError as e:
        return str(e)
    finally:
        conn.close()


def damage_one_page(db: Path) -> int:
    """Overwrite one page near the middle of ``db`` with garbage, the first from the middle on whose
    damage ``quick_check`` sees (a page on the free list holds nothing to check); return its number."""
    garbage = random.Random(16).randbytes(PAGE)
    pages = db.stat().st_size // PAGE
    for page in range(pages // 2, pages):
        with open(db, "r+b") as f:
            f.seek(page * PAGE)
            original = f.read(PAGE)
            f.seek(page * PAGE)
            f.write(garbage)
        if quick_check(db) != "ok":
            return page + 1
        with open(db, "r+b") as f:
            f.seek(page * PAGE)
            f.write(original)
    raise AssertionError("no page from the middle on is one quick_check reads")


@pytest.fixture
def damaged(tmp_path: Path) -> Path:
    db = tmp_path / "mem.db"
    with pmem.open(db) as store:
        store.apply([{"op": "accept", "key": f"k{i % 200}", "value": f"v{i}", "text": "an observation " * 8}
                     for i in range(2000)])
        store.get("k1")
    assert not Path(f"{db}-wal").exists()  # closed: every page is in the file itself
    damage_one_page(db)
    return db


def unchanged(db: Path, before: bytes) -> bool:
    """The file holds the same bytes, and no write-ahead log holds anything more."""
    wal = Path(f"{db}-wal")
    return db.read_bytes() == before and (not wal.exists() or wal.stat().st_size == 0)


def test_a_damaged_store_refuses_writes_and_nothing_is_appended(damaged: Path) -> None:
    before = damaged.read_bytes()
    for args, stdin in ((("accept", "k1", "new"), None),
                        (("apply", "-"), b'{"op": "accept", "key": "k2", "value": "new"}\n')):
        r = run_pmem(damaged, *args, stdin=stdin)
        err = error(r)
        assert r.returncode == 1 and err["error"] == "store unavailable", err
        assert err["detail"].startswith(f"store {damaged} is damaged: ") and err["detail"].endswith("; run pmem doctor")
        assert unchanged(damaged, before)
    with pmem.open(damaged) as store:
        with pytest.raises(pmem.StoreUnavailable, match="is damaged"):
            store.accept("k1", "new")
        with pytest.raises(pmem.StoreUnavailable, match="is damaged"):  # refused again, not just once
            store.apply([{"op": "accept", "key": "k3", "value": "new"}])
    assert unchanged(damaged, before)


def test_pmem_doctor_fails_the_integrity_check_of_a_damaged_store_and_names_a_repair(damaged: Path) -> None:
    r = run_pmem(damaged, "doctor")
    assert r.returncode == 1 and r.stderr == b""
    checks = {c["check"]: c for c in lines(r.stdout)}
    integrity = checks["integrity"]
    assert not integrity["ok"] and "integrity_check" in integrity["detail"]
    assert f"sqlite3 {damaged} .recover" in integrity["fix"]


def test_without_the_check_the_damaged_store_acknowledges_the_write(damaged: Path) -> None:
    """The defect as it was: ``PMEM_WRITE_CHECK_MAX_MB=0`` turns the check off (files over the limit
    are not checked either: docs/reliability.md), and the write into the damaged file is acknowledged."""
    r = run_pmem(damaged, "accept", "k1", "new", env={**os.environ, "PMEM_WRITE_CHECK_MAX_MB": "0"})
    assert r.returncode == 0 and lines(r.stdout)[0]["applied"] is True


def test_a_healthy_store_writes_as_before(tmp_path: Path) -> None:
    db = tmp_path / "mem.db"
    ok(db, "accept", "k", "v1")
    (receipt,) = ok(db, "accept", "k", "v2")
    assert receipt["event_index"] == 2 and quick_check(db) == "ok"
