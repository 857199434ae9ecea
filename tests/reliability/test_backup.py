"""``pmem backup`` and ``pmem export``: an online copy of a SQLite store while writers run.
Four writer processes append without pause while five backups are taken through the CLI; every backup passes SQLite's
``integrity_check`` and ``pmem doctor``, and holds a prefix of the log with no gap: events 1..N exactly
as the source stores them, with the op ids of those events and nothing later. SQLite-only: PostgreSQL
stores are backed up with the server's own tools, which ``pmem backup`` names when asked. An export taken
while the same writers run is one snapshot too: it imports whole, as a prefix of the log with its op ids."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import orjson

import pmem
from tests.reliability.conftest import PMEM_BIN, WORKERS, child_env

WRITERS, BACKUPS = 4, 5


def rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def wait_for_events(db: Path, at_least: int, writers: list[subprocess.Popen[bytes]]) -> int:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert all(w.poll() is None for w in writers), "a writer died"
        with pmem.open(db) as s:
            last = s.last_index()
        if last >= at_least:
            return last
        time.sleep(0.1)
    raise AssertionError(f"the writers did not reach {at_least} events")


def take_backups(db: Path, tmp_path: Path, writers: list[subprocess.Popen[bytes]]) -> list[Path]:
    copies = []
    for n in range(BACKUPS):
        wait_for_events(db, 40 * (n + 1), writers)
        path = tmp_path / f"backup-{n}.db"
        r = subprocess.run([PMEM_BIN, "--db", str(db), "backup", str(path)], capture_output=True, text=True,
                           env=child_env())
        assert r.returncode == 0, r.stderr
        assert orjson.loads(r.stdout)["integrity"] == "ok"
        copies.append(path)
    return copies


def test_backups_taken_while_four_writers_run_are_whole_gapless_prefixes(tmp_path: Path) -> None:
    db = tmp_path / "live.db"
    with pmem.open(db) as s:
        s.accept("seed", "1")
    writers = [subprocess.Popen([sys.executable, str(WORKERS), "append", str(db), f"w{i}", str(i)],
                                stdout=subprocess.DEVNULL, env=child_env()) for i in range(WRITERS)]
    try:
        copies = take_backups(db, tmp_path, writers)
    finally:
        for w in writers:
            w.terminate()
        for w in writers:
            w.wait(timeout=60)
    source = rows(db, "SELECT rowid, originator_id, originator_version, topic, state FROM stored_events ORDER BY rowid")
    source_ops = rows(db, "SELECT namespace, op_id, event_index FROM pmem_op_ids ORDER BY namespace, op_id")
    lasts = []
    for path in copies:
        assert rows(path, "PRAGMA integrity_check") == [("ok",)]
        got = rows(path, "SELECT rowid, originator_id, originator_version, topic, state FROM stored_events "
                         "ORDER BY rowid")
        last = len(got)
        assert [r[0] for r in got] == list(range(1, last + 1))  # no gap
        assert got == source[:last]  # a prefix of the log, byte for byte
        ops = rows(path, "SELECT namespace, op_id, event_index FROM pmem_op_ids ORDER BY namespace, op_id")
        assert ops == [o for o in source_ops if int(str(o[2])) <= last]
        lasts.append(last)
    assert lasts == sorted(lasts) and len(set(lasts)) == BACKUPS  # each taken later, while the log grew
    doctor = subprocess.run([PMEM_BIN, "--db", str(copies[-1]), "doctor"], capture_output=True, text=True,
                            env=child_env())
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    checks = {c["check"]: c for c in map(orjson.loads, doctor.stdout.splitlines())}
    assert checks["event_indices"]["detail"] == f"{lasts[-1]} events, indices 1 to {lasts[-1]} with none missing"


def test_backup_refuses_an_existing_target_and_a_postgresql_store(tmp_path: Path) -> None:
    db = tmp_path / "live.db"
    with pmem.open(db) as s:
        s.accept("k", "v")
    taken = tmp_path / "taken.db"
    taken.write_bytes(b"mine")
    r = subprocess.run([PMEM_BIN, "--db", str(db), "backup", str(taken)], capture_output=True, text=True)
    assert r.returncode == 2 and "exists" in orjson.loads(r.stderr)["detail"] and taken.read_bytes() == b"mine"
    pg = subprocess.run([PMEM_BIN, "--db", "postgresql://nobody@127.0.0.1:1/none", "backup", str(tmp_path / "x.db")],
                        capture_output=True, text=True)
    assert pg.returncode == 2 and "pg_dump" in orjson.loads(pg.stderr)["detail"]
    assert not (tmp_path / "x.db").exists()


def test_backup_to_a_name_too_long_for_the_file_system_is_bad_input(tmp_path: Path) -> None:
    db = tmp_path / "live.db"
    with pmem.open(db) as s:
        s.accept("k", "v")
    for target in (tmp_path / ("x" * 1000), tmp_path / ("x" * 1000) / "copy.db"):
        r = subprocess.run([PMEM_BIN, "--db", str(db), "backup", str(target)], capture_output=True, text=True)
        assert r.returncode == 2, r.stderr  # (was an internal error, exit 70)
        assert orjson.loads(r.stderr)["detail"].endswith(": File name too long")
    assert not [p for p in tmp_path.iterdir() if not p.name.startswith("live.db")]  # nothing half-written


def test_an_export_taken_while_four_writers_run_imports_as_a_gapless_prefix(tmp_path: Path) -> None:
    from pmem.adapters.service.portability import export_lines, import_lines

    db = tmp_path / "live.db"
    with pmem.open(db) as s:
        s.accept("seed", "1")
    writers = [subprocess.Popen([sys.executable, str(WORKERS), "append", str(db), f"w{i}", str(i)],
                                stdout=subprocess.DEVNULL, env=child_env()) for i in range(WRITERS)]
    try:
        wait_for_events(db, 100, writers)
        lines = list(export_lines(db))
        wait_for_events(db, len(lines) + 50, writers)  # the log went on past the export
    finally:
        for w in writers:
            w.terminate()
        for w in writers:
            w.wait(timeout=60)
    target = tmp_path / "imported.db"
    last = import_lines(str(target), lines, "live export")["last_index"]
    sql = "SELECT rowid, originator_id, originator_version, topic, state FROM stored_events ORDER BY rowid"
    assert rows(target, sql) == rows(db, sql)[:last]
    ops = "SELECT namespace, op_id, event_index FROM pmem_op_ids ORDER BY namespace, op_id"
    assert rows(target, ops) == [o for o in rows(db, ops) if int(str(o[2])) <= last]
