"""One write turn per SQLite store file in this process, taken before SQLite's own write lock.

SQLite lets one writer at a time into a file and makes the others wait in its busy handler, which
sleeps between tries in growing steps (1, 2, 5, 10 ... up to 100 ms): a writer that misses the lock by
a millisecond may sleep for tens of them. In a server, where request threads, the catch-up thread and
a point read folding its namespace all write the same file, those sleeps were the tail of every
latency. The writers of one process queue here instead, on a lock that hands over at once; writers in
other processes still meet SQLite's handler, as before (docs/server.md, "Reads and the projections").
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager

WAIT_S = 60.0  # as long as SQLite's busy timeout on the store's connections

_TURNS: dict[str, threading.RLock] = {}
_GUARD = threading.Lock()


def turn_for(path: str) -> threading.RLock | None:
    """The write turn of the store file at ``path`` (None for a memory database: it has one connection
    or shares a cache, and nothing to hand over)."""
    if not path or path == ":memory:" or "mode=memory" in path:
        return None
    key = os.path.realpath(path.removeprefix("file:").split("?", 1)[0])
    with _GUARD:
        return _TURNS.setdefault(key, threading.RLock())


def file_of(conn: sqlite3.Connection) -> str:
    """The path of ``conn``'s main database file ("" for a memory database)."""
    return str(conn.execute("PRAGMA database_list").fetchone()[2] or "")


@contextmanager
def write_turn(turn: threading.RLock | None, wait: float = WAIT_S) -> Iterator[None]:
    """Hold ``turn`` (re-entrant: a thread's nested writes take it again) for one write transaction."""
    if turn is None:
        yield
        return
    if not turn.acquire(timeout=wait):
        raise sqlite3.OperationalError(f"database is locked: no write turn within {wait:g} s")
    try:
        yield
    finally:
        turn.release()


def busy(turn: threading.RLock | None) -> bool:
    """Whether another thread holds ``turn`` now (a write would wait for it)."""
    if turn is None or not turn.acquire(blocking=False):
        return turn is not None
    turn.release()
    return False


def _forget_in_child() -> None:
    """A forked child starts with no turn held (a thread of the parent may have held one at the fork)."""
    global _GUARD
    _TURNS.clear()
    _GUARD = threading.Lock()


os.register_at_fork(after_in_child=_forget_in_child)
