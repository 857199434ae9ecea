"""The write turn of a SQLite store file: this process's writers of one file queue on it, a nested write of
the same thread takes it again, a memory database has none, and a forked child starts with none held
(real files, real threads, a real fork)."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

import pytest

import pmem
from pmem.adapters.storage.projection_db import SqliteDb, connect
from pmem.adapters.storage.write_turns import busy, file_of, turn_for, write_turn


def _db(path: Path) -> SqliteDb:
    return SqliteDb(connect(str(path)))


def test_writers_of_one_file_in_this_process_take_turns(db_path: Path) -> None:
    with pmem.open(str(db_path)):
        pass  # a store file, in WAL mode
    one, two = _db(db_path), _db(db_path)
    one.execute("CREATE TABLE t (n INTEGER)")
    assert turn_for(str(db_path)) is turn_for(f"file:{db_path}?mode=rw")  # one turn per file, however named
    entered, release, second_done = threading.Event(), threading.Event(), threading.Event()

    def first() -> None:
        with one.write("t"):
            one.execute("INSERT INTO t VALUES (1)")
            entered.set()
            release.wait(30)

    def second() -> None:
        with two.write("t"):
            two.execute("INSERT INTO t VALUES (2)")
        second_done.set()

    a = threading.Thread(target=first)
    a.start()
    assert entered.wait(30)
    b = threading.Thread(target=second)
    b.start()
    assert two.write_busy() and not second_done.wait(0.3)  # the second writer waits for its turn
    release.set()
    a.join()
    b.join()
    assert second_done.is_set() and not two.write_busy()
    assert [r[0] for r in one.execute("SELECT n FROM t ORDER BY rowid")] == [1, 2]


def test_a_thread_that_holds_the_turn_takes_it_again_and_is_not_busy_for_itself(db_path: Path) -> None:
    db = _db(db_path)
    turn = turn_for(file_of(db.raw))
    with write_turn(turn):
        assert not busy(turn) and not db.write_busy()
        with write_turn(turn):  # a nested write of the same thread
            pass
    assert not busy(turn)


def test_a_memory_database_has_no_turn() -> None:
    db = SqliteDb(sqlite3.connect(":memory:"))
    assert file_of(db.raw) == "" and turn_for("") is None and turn_for("file:x?mode=memory&cache=shared") is None
    assert not db.write_busy()
    with db.write("t"):
        db.execute("CREATE TABLE t (n INTEGER)")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_starts_with_no_turn_held(db_path: Path) -> None:
    turn = turn_for(str(db_path))
    assert turn is not None
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with write_turn(turn):
            held.set()
            release.wait(30)

    thread = threading.Thread(target=hold)
    thread.start()
    assert held.wait(30)
    try:
        pid = os.fork()
        if pid == 0:  # the child: the parent's thread is gone, and so is the turn it held
            child_turn = turn_for(str(db_path))
            ok = child_turn is not None and child_turn.acquire(timeout=5)
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        release.set()
        thread.join()
