"""``pmem doctor``: each check passes on a healthy store, fails on the fault it looks
for with the fix it names, and the named fix makes it pass again. Real stores on both backends (``db``);
the checks of SQLite files only (integrity, shadow tables a rebuild drops, rebuild processes) say so."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import pmem
from pmem.adapters.readmodels.heartbeat import DbHeartbeat
from pmem.domain.keys import cell_id
from tests.conftest import ROOT
from tests.e2e.test_cli import error, lines, ok
from tests.e2e.test_cli import pmem as run_pmem
from tests.reliability.test_storage_failures import remount, tmpfs

CHECKS = ["integrity", "event_indices", "cell_state", "projections", "shadow_tables", "workers", "rebuild_workers",
          "lag", "stopped", "key_edition"]
EDITION1 = ROOT / "tests" / "data" / "edition1_store" / "store.sqlite3"


def doctor(db: str | Path, *args: str) -> tuple[int, dict[str, dict[str, Any]]]:
    """``pmem doctor``: its exit code and its checks by name (every line is a check, nothing on stderr)."""
    r = run_pmem(db, "doctor", *args)
    assert r.stderr == b"", r.stderr
    found = lines(r.stdout)
    assert [c["check"] for c in found] == CHECKS
    assert all(set(c) == {"check", "ok", "detail", "fix"} for c in found)
    return r.returncode, {c["check"]: c for c in found}


def filled(db: str, cells: int = 30) -> None:
    with pmem.open(db) as store:
        store.apply([{"op": "accept", "key": f"k{i % cells}", "value": f"v{i}", "source": f"s{i % 3}"}
                     for i in range(3 * cells)])
        store.contest("k1", "other")
        store.get("k0")  # the frontier catches up


def failed(checks: dict[str, dict[str, Any]]) -> list[str]:
    return [name for name, c in checks.items() if not c["ok"]]


def test_a_healthy_store_passes_every_check(db: str) -> None:
    filled(db)
    code, checks = doctor(db)
    assert code == 0 and failed(checks) == []
    assert all(c["fix"] is None for c in checks.values())
    assert checks["projections"]["detail"] == "30 sampled cells match a replay of the log up to index 91"
    assert "frontier at 91 (lag 0)" in checks["lag"]["detail"]
    assert checks["event_indices"]["detail"] == "91 events, indices 1 to 91 with none missing"
    if db.startswith("postgresql"):
        assert "not applicable" in checks["integrity"]["detail"] and "pg_amcheck" in checks["integrity"]["detail"]
        assert "not applicable" in checks["rebuild_workers"]["detail"]
    else:
        assert checks["integrity"]["detail"] == "PRAGMA integrity_check: ok"


def test_the_python_api_answers_the_same_checks(db: str) -> None:
    filled(db, 5)
    with pmem.open(db) as store:
        assert [c["check"] for c in store.doctor()] == CHECKS
        assert all(c["ok"] for c in store.doctor(sample=1))
        with pytest.raises(pmem.InvalidOperation, match="sample"):
            store.doctor(sample=-1)
    with pytest.raises(pmem.StoreClosed):
        store.doctor()


def test_a_tampered_projection_row_fails_the_sample_naming_the_key_and_a_rebuild_repairs_it(db: str) -> None:
    filled(db)
    with pmem.open(db) as store:
        store.projection_db.execute("UPDATE versions SET value = 'tampered' WHERE cell_id = "
                                    "(SELECT cell_id FROM cells WHERE key = 'k7') AND status = 'active'")
        assert store.get("k7").value == "tampered"  # what reads now serve: the projection is wrong
    code, checks = doctor(db)
    assert code == 1 and failed(checks) == ["projections"]
    assert "'k7' in default" in checks["projections"]["detail"]
    assert checks["projections"]["fix"] == "pmem rebuild --projection frontier"
    ok(db, "rebuild", "--projection", "frontier")
    code, checks = doctor(db)
    assert code == 0 and failed(checks) == []


def test_a_damaged_cell_state_row_fails_naming_the_cell_and_the_named_reset_repairs_it(db: str) -> None:
    filled(db, 3)  # 3 cells: the sample draws every one of them through the log
    damaged = cell_id("default", "k1").hex
    with pmem.open(db) as store:
        store.projection_db.execute("UPDATE pmem_cells SET revision = revision + 1 WHERE cell_id = ?", (damaged,))
    code, checks = doctor(db)
    assert code == 1 and failed(checks) == ["cell_state"]
    assert checks["cell_state"]["detail"].endswith(f"differs from a fold of their events (cell ids {damaged})")
    fix = checks["cell_state"]["fix"]
    assert '.pmem_state_at' in fix if db.startswith("postgresql") else fix.startswith(f'sqlite3 {db} "DELETE FROM')
    with pmem.open(db) as store:  # what the fix runs
        store.projection_db.execute("DELETE FROM pmem_state_at")
    ok(db, "stats")
    code, checks = doctor(db)
    assert code == 0 and failed(checks) == []
    assert checks["cell_state"]["detail"] == ("the cell state reflects the log up to index 10; "
                                              "3 sampled cells match a fold of their events")


@pytest.mark.parametrize("lost", [(40, 41), (1,), (91,)])
def test_a_log_with_missing_event_indices_fails_naming_the_first(db: str, lost: tuple[int, ...]) -> None:
    """A backup or an import must be a gapless prefix: events lost in the middle or at the start fail
    the check (at the end nothing can tell: the log is a shorter prefix, which passes)."""
    filled(db)
    column, table = ("notification_id", "pmem_events") if db.startswith("postgresql") else ("rowid", "stored_events")
    with pmem.open(db) as store:
        for index in lost:
            store.projection_db.execute(f"DELETE FROM {table} WHERE {column} = ?", (index,))
    code, checks = doctor(db)
    if lost == (91,):
        assert checks["event_indices"] == {"check": "event_indices", "ok": True, "fix": None,
                                           "detail": "90 events, indices 1 to 90 with none missing"}
        return
    assert code == 1 and "event_indices" in failed(checks)
    assert checks["event_indices"]["detail"] == (f"{len(lost)} of the indices 1 to 91 are missing, the first "
                                                 f"{lost[0]}: the log has lost events")
    assert checks["event_indices"]["fix"].startswith("restore the store from a backup that passes this check")


def test_a_cell_missing_from_the_projection_is_found_through_the_log(db: str) -> None:
    filled(db, 3)  # 3 cells: the sample draws every one of them through the log
    with pmem.open(db) as store:
        store.projection_db.execute("DELETE FROM cells WHERE key = 'k2'")
    code, checks = doctor(db)
    assert code == 1 and "'k2' in default" in checks["projections"]["detail"]


def test_a_planted_shadow_table_fails_with_its_fix(db: str) -> None:
    filled(db, 5)
    with pmem.open(db) as store:
        store.projection_db.execute("CREATE TABLE cells__0badf00d__rebuild (cell_id TEXT)")
    code, checks = doctor(db)
    assert code == 1 and failed(checks) == ["shadow_tables"]
    assert "cells__0badf00d__rebuild" in checks["shadow_tables"]["detail"]
    if db.startswith("postgresql"):  # a rebuild there makes (and drops) no shadow tables
        assert checks["shadow_tables"]["fix"].startswith("DROP TABLE cells__0badf00d__rebuild")
        return
    assert checks["shadow_tables"]["fix"].startswith("pmem rebuild --projection frontier")
    ok(db, "rebuild", "--projection", "frontier")
    assert doctor(db)[0] == 0


def test_a_worker_that_died_running_fails_with_the_command_that_restarts_it(db: str) -> None:
    filled(db, 5)
    with pmem.open(db) as store:
        DbHeartbeat(store.projection_db, db, ["graph"], 0.1)  # registered, then never beats again
        store.projection_db.execute("UPDATE pmem_workers SET state = 'running', beat_at = ?", (time.time() - 60,))
    code, checks = doctor(db)
    assert code == 1 and failed(checks) == ["workers"]
    assert "graph (pid" in checks["workers"]["detail"]
    assert checks["workers"]["fix"].startswith("pmem worker --projection graph")
    with pmem.open(db) as store:
        store.projection_db.execute("UPDATE pmem_workers SET state = 'stopped'")  # a worker stopped gracefully
    assert doctor(db)[0] == 0


def test_a_rebuild_worker_process_whose_rebuild_ended_fails_with_its_pid(db_path: Path) -> None:
    """SQLite only: rebuilds on PostgreSQL start no processes. The process stands in for a worker whose
    rebuild was killed: its command line is a worker's, and its shadow tables are gone."""
    filled(str(db_path), 5)
    with pmem.open(db_path) as s:
        store = s.projection_db.execute("PRAGMA database_list").fetchone()[2]  # as a rebuild names it
    job = json.dumps({"store": store, "ranges": [], "stop": 1, "total": 1, "suffix": "__0badf00d__rebuild"})
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "-m",
                             "pmem.adapters.readmodels.parallel_rebuild", job])
    try:
        deadline = time.monotonic() + 10
        while b"parallel_rebuild" not in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        code, checks = doctor(db_path)
        assert code == 1 and failed(checks) == ["rebuild_workers"]
        assert checks["rebuild_workers"]["fix"] == f"kill {proc.pid}"
        with sqlite3.connect(db_path) as conn:  # the same process while its rebuild's tables exist: running
            conn.execute("CREATE TABLE cells__0badf00d__rebuild (cell_id TEXT)")
        with pmem.open(db_path) as s:
            (check,) = [c for c in s.doctor() if c["check"] == "rebuild_workers"]
        assert check["ok"] and str(proc.pid) in check["detail"]
    finally:
        proc.kill()
        proc.wait()
    assert doctor(db_path)[1]["rebuild_workers"]["detail"] == "no rebuild worker processes"


def test_the_key_edition_is_reported(db: str, tmp_path: Path) -> None:
    filled(db, 3)
    code, checks = doctor(db)
    assert checks["key_edition"] == {"check": "key_edition", "ok": True,
                                     "detail": "key edition 2 (the rule of new stores)", "fix": None}
    old = tmp_path / "edition1.sqlite3"
    shutil.copy(EDITION1, old)
    code, checks = doctor(old)
    assert code == 0 and checks["key_edition"]["ok"]
    assert checks["key_edition"]["detail"].startswith("key edition 1: the store keeps the edition-1 key rule")


def test_a_projection_ahead_of_the_log_fails_the_lag_check(db: str) -> None:
    filled(db, 3)
    with pmem.open(db) as store:
        store.catch_up()
        store.projection_db.execute("UPDATE pmem_tracking SET position = 1000 WHERE name = 'graph'")
    code, checks = doctor(db)
    assert code == 1 and "lag" in failed(checks)
    assert "graph is ahead" in checks["lag"]["detail"] and checks["lag"]["fix"] == "pmem rebuild --projection graph"


def test_it_works_on_a_read_only_file_system_with_a_lagging_projection(tmp_path: Path) -> None:
    """SQLite only: a store on a tmpfs remounted read-only (needs root, else skipped, as in
    tests/reliability/test_storage_failures.py), where no write can succeed; a projection lags, and the
    doctor reads what it needs without catching it up."""
    with tmpfs(tmp_path / "ro", "32m") as where:
        db = where / "mem.db"
        filled(str(db))
        with pmem.open(db) as store:
            store.accept("late", "write")
        for name in (f"{db}-wal", f"{db}-shm"):  # as a store in use leaves them: SQLite reads a WAL file on
            Path(name).touch()  # read-only media only through them (without, no store opens: one error line)
        remount(where, "ro")
        code, checks = doctor(db)
        assert code == 0 and failed(checks) == []
        assert "frontier at 91 (lag 1)" in checks["lag"]["detail"]


def test_it_changes_no_byte_of_the_store(db_path: Path) -> None:
    filled(str(db_path))
    with pmem.open(db_path) as store:
        store.accept("late", "write")  # a projection lags behind this one: the doctor must not catch it up
    before = db_path.read_bytes()
    code, checks = doctor(db_path)
    assert code == 0 and "frontier at 91 (lag 1)" in checks["lag"]["detail"]
    assert db_path.read_bytes() == before


def test_no_store_is_created_and_bad_arguments_are_usage_errors(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    r = run_pmem(missing, "doctor")
    assert r.returncode == 1 and "no such file" in error(r)["detail"] and not missing.exists()
    r = run_pmem(missing, "doctor", "--sample", "-1")
    assert r.returncode == 2 and "--sample" in error(r)["detail"]
