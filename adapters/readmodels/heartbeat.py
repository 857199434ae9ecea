"""Worker heartbeats in the store's database (SQLite file or PostgreSQL schema): one row per followed projection.

    pmem_workers (name, pid, host, started_at, beat_at, position, state, heartbeat_s)

A running worker rewrites its row every heartbeat interval and after each batch; on a graceful
stop it writes ``state = 'stopped'``. A worker killed with SIGKILL leaves ``running`` behind, so
liveness is judged by the reader: alive means ``running``, a beat younger than
:data:`STALE_AFTER` heartbeat intervals, and, on this host, a process with that pid.
``pmem stats`` reads the rows (never writes); ``pmem worker`` refuses to start a second live
worker for the same projection.

The rows go through the projections' :class:`pmem.adapters.storage.projection_db.ProjectionDb`, so the same code
serves both backends: registration is one ``write`` transaction (SQLite's write lock, or a
PostgreSQL advisory lock), a beat one upsert in autocommit.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

from pmem.adapters.storage.projection_db import ProjectionDb, as_db
from pmem.domain.errors import StoreUnavailable, WorkerAlreadyRunning

TABLE = "pmem_workers"
STALE_AFTER = 3  # heartbeat intervals without a beat before a worker counts as gone
COLUMNS = ("name", "pid", "host", "started_at", "beat_at", "position", "state", "heartbeat_s")


def _schema(db: ProjectionDb) -> str:
    return (f"CREATE TABLE IF NOT EXISTS {TABLE} (name TEXT PRIMARY KEY, pid {db.int_type} NOT NULL, "
            "host TEXT NOT NULL, started_at DOUBLE PRECISION NOT NULL, beat_at DOUBLE PRECISION NOT NULL, "
            f"position {db.int_type} NOT NULL, state TEXT NOT NULL, heartbeat_s DOUBLE PRECISION NOT NULL)")


class DbHeartbeat:
    """The rows of one worker process (``names``: the projections it follows); ``label`` names the
    store in error messages."""

    def __init__(self, db: ProjectionDb, label: str, names: list[str], heartbeat_s: float) -> None:
        self.conn, self.label, self.heartbeat_s = db, label, heartbeat_s
        self.pid, self.host, self.started_at = os.getpid(), socket.gethostname(), time.time()
        self._upsert = db.upsert(TABLE, COLUMNS, ("name",))
        try:
            with db.write(TABLE):  # serialised: two workers starting at once cannot both register
                db.execute(_schema(db))
                for name in names:
                    other = _read(db, name)
                    if other is not None and other["alive"] and other["pid"] != self.pid:
                        raise WorkerAlreadyRunning(
                            f"projection {name} of {label} already has a live worker (pid {other['pid']} on "
                            f"{other['host']}, last beat {other['beat_age_s']} s ago)")
                    self._write(name, 0, "starting")
        except db.errors as e:
            raise StoreUnavailable(f"cannot register a worker in {label}: {_first_line(e)}") from e

    def beat(self, name: str, position: int, state: str = "running") -> None:
        try:
            self._write(name, position, state)  # autocommit: one small transaction
        except self.conn.errors as e:
            raise StoreUnavailable(f"cannot write the heartbeat of worker {name} to {self.label}: "
                                   f"{_first_line(e)}") from e

    def _write(self, name: str, position: int, state: str) -> None:
        self.conn.execute(self._upsert, (name, self.pid, self.host, self.started_at, time.time(), position, state,
                                         self.heartbeat_s))


def workers(conn: Any) -> dict[str, dict[str, Any]]:
    """Every registered worker by projection name (empty when none ever ran); reads only. ``conn``: a
    :class:`pmem.adapters.storage.projection_db.ProjectionDb` (or a bare SQLite connection)."""
    conn = as_db(conn)
    if TABLE not in conn.names():
        return {}
    names = [r[0] for r in conn.execute(f"SELECT name FROM {TABLE} ORDER BY name")]
    return {n: w for n in names if (w := _read(conn, n)) is not None}


def _read(conn: ProjectionDb, name: str) -> dict[str, Any] | None:
    row = conn.execute(f"SELECT pid, host, beat_at, state, heartbeat_s FROM {TABLE} WHERE name=?",
                       (name,)).fetchone()
    if row is None:
        return None
    pid, host, beat_at, state, heartbeat_s = row
    age = max(time.time() - beat_at, 0.0)
    alive = state in ("starting", "running") and age <= STALE_AFTER * max(heartbeat_s, 1.0)
    if alive and host == socket.gethostname():
        alive = _process_exists(pid)
    return {"pid": pid, "host": host, "state": state, "alive": alive, "beat_age_s": round(age, 3)}


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]
