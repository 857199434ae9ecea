"""The vector projection's tables, kept in the store's own SQLite file next to the log.

    pmem_vec_position  (name, position)         the event index the tables reflect
    pmem_vec_versions  (vector_id, cell, vid, namespace, key, text)   one row per version ever created
    pmem_vec_intervals (vector_id, namespace, opened_at, closed_at)   open intervals, closed_at NULL = open

The tables are written in one transaction together with their position, so they always describe
exactly the events up to it. Catching up reads the events after the position, folds them with
:class:`projections.vectors.VectorFold` (starting from the touched cells' earlier events) and
replaces the touched cells' intervals. Eligibility at event index N is a plain query: the versions
with an interval ``opened_at <= N < closed_at``; what changed between two indices is the versions
with an interval boundary between them (both columns are indexed).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from eventsourcing.persistence import PersistenceError

from adapters.eventlog import EventLog
from adapters.progress import Progress, silent
from domain.errors import StoreUnavailable
from projections.replay import Timeline, fold
from projections.vectors import NewVector, VectorFold

NAME = "vectors"
CHUNK = 20_000  # events folded per step of a catch-up
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS pmem_vec_position (name TEXT PRIMARY KEY, position INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS pmem_vec_versions (vector_id INTEGER PRIMARY KEY, cell TEXT NOT NULL, "
    "vid INTEGER NOT NULL, namespace TEXT NOT NULL, key TEXT NOT NULL, text TEXT NOT NULL, "
    "UNIQUE (cell, vid))",
    "CREATE TABLE IF NOT EXISTS pmem_vec_intervals (vector_id INTEGER NOT NULL, namespace TEXT NOT NULL, "
    "opened_at INTEGER NOT NULL, closed_at INTEGER)",
    "CREATE INDEX IF NOT EXISTS pmem_vec_intervals_by_vector ON pmem_vec_intervals (vector_id)",
    "CREATE INDEX IF NOT EXISTS pmem_vec_intervals_by_time ON pmem_vec_intervals (namespace, opened_at)",
    "CREATE INDEX IF NOT EXISTS pmem_vec_intervals_by_close ON pmem_vec_intervals (namespace, closed_at)",
)


class _Moved(Exception):
    """Another process caught the tables up first; what this one folded is discarded."""


@dataclass(frozen=True, slots=True)
class Eligible:
    """A version open at the asked event index: its vector id and the cell it belongs to."""

    vector_id: int
    cell: str  # cell id, hex
    key: str
    vid: int


class VectorProjection:
    """Positioned tables of versions and open intervals over one :class:`EventLog`."""

    def __init__(self, log: EventLog, chunk: int = CHUNK) -> None:
        self.log = log
        self.chunk = chunk  # events folded and committed per transaction
        with self._tx(commit=True) as c:
            for stmt in SCHEMA:
                c.execute(stmt)

    # -- reading -------------------------------------------------------------
    def position(self) -> int:
        with self._tx(commit=False) as c:
            return _position(c)

    def count(self) -> int:
        """Vectors so far; ids are ``0 .. count-1``."""
        with self._tx(commit=False) as c:
            c.execute("SELECT COALESCE(MAX(vector_id) + 1, 0) FROM pmem_vec_versions")
            return int(c.fetchone()[0])

    def texts(self, start: int, stop: int) -> list[str]:
        """Texts of vectors ``start <= id < stop``, by id."""
        with self._tx(commit=False) as c:
            c.execute("SELECT text FROM pmem_vec_versions WHERE vector_id>=? AND vector_id<? "
                      "ORDER BY vector_id", (start, stop))
            return [r[0] for r in c.fetchall()]

    def eligible(self, namespace: str, as_of: int) -> list[Eligible]:
        """Versions of the namespace open at event index ``as_of`` (caught up to at least it), by id."""
        with self._tx(commit=False) as c:
            c.execute(
                "SELECT i.vector_id, v.cell, v.key, v.vid FROM pmem_vec_intervals i "
                "JOIN pmem_vec_versions v ON v.vector_id = i.vector_id "
                "WHERE i.namespace=? AND i.opened_at<=? AND (i.closed_at IS NULL OR i.closed_at>?) "
                "ORDER BY i.vector_id", (namespace, as_of, as_of))
            return [Eligible(*row) for row in c.fetchall()]

    def changes(self, namespace: str, since: int, at: int) -> list[tuple[Eligible, bool]]:
        """The versions of the namespace that may be open at ``at`` but not at ``since`` or the
        reverse (one of their intervals opened or closed in between), each with whether it is open
        at ``at``. Applied to the versions open at ``since``, they give those open at ``at``."""
        with self._tx(commit=False) as c:
            c.execute(
                "SELECT v.vector_id, v.cell, v.key, v.vid, "
                "MAX(i.opened_at<=? AND (i.closed_at IS NULL OR i.closed_at>?)) "
                "FROM pmem_vec_intervals i JOIN pmem_vec_versions v ON v.vector_id = i.vector_id "
                "WHERE i.vector_id IN (SELECT vector_id FROM pmem_vec_intervals WHERE namespace=? "
                "AND opened_at>? AND opened_at<=? UNION SELECT vector_id FROM pmem_vec_intervals "
                "WHERE namespace=? AND closed_at>? AND closed_at<=?) GROUP BY v.vector_id",
                (at, at, namespace, since, at, namespace, since, at))
            return [(Eligible(*row[:4]), bool(row[4])) for row in c.fetchall()]

    # -- catching up ---------------------------------------------------------
    def catch_up(self, progress: Progress = silent) -> int:
        """Fold every event after the position into the tables; return the new position.
        ``progress`` is told how far each committed chunk moved the position."""
        timelines: dict[UUID, Timeline] = {}  # cells folded so far in this call, kept across chunks
        bar = progress(NAME, max(self.log.last_index() - self.position(), 0))
        try:
            while True:
                start = self.position()
                last = self.log.last_index()
                if last <= start:
                    return start
                stop = min(last, start + self.chunk)
                try:
                    self._fold_and_write(start, stop, timelines)
                except _Moved:
                    timelines.clear()
                bar.update(self.position() - start)
        finally:
            bar.close()

    def reset(self) -> None:
        """Forget everything: the next catch-up replays the log from index 1."""
        with self._tx(commit=True) as c:
            for table in ("pmem_vec_position", "pmem_vec_versions", "pmem_vec_intervals"):
                c.execute(f"DELETE FROM {table}")

    def _fold_and_write(self, start: int, stop: int, timelines: dict[UUID, Timeline]) -> None:
        """Fold events ``start+1 .. stop``; ``timelines`` holds cells already folded up to ``start``
        (it is updated in place); other touched cells are loaded and folded from the log."""
        events = list(self.log.indexed_events(start + 1, stop))
        touched = list({e.originator_id for _, e in events})
        missing = [cid for cid in touched if cid not in timelines]
        timelines.update(fold(ev for evs in self.log.cell_events(missing, upto=start).values() for ev in evs))
        with self._tx(commit=False) as c:
            c.execute("SELECT COALESCE(MAX(vector_id) + 1, 0) FROM pmem_vec_versions")
            f = VectorFold(timelines, int(c.fetchone()[0]))
            ids = self._vector_ids(c, touched)
        f.apply_all(events)
        for n in f.new:
            ids[(n.cell.hex, n.vid)] = n.vector_id
        with self._tx(commit=True) as c:
            # Take the write lock first, then check nobody moved the position meanwhile.
            c.execute("INSERT OR IGNORE INTO pmem_vec_position VALUES (?, 0)", (NAME,))
            if _position(c) != start:
                raise _Moved
            c.executemany("INSERT INTO pmem_vec_versions VALUES (?,?,?,?,?,?)", _version_rows(f.new))
            for cid in f.touched:
                hexid, ns = cid.hex, f.timelines[cid].state.namespace
                c.execute("DELETE FROM pmem_vec_intervals WHERE vector_id IN "
                          "(SELECT vector_id FROM pmem_vec_versions WHERE cell=?)", (hexid,))
                c.executemany("INSERT INTO pmem_vec_intervals VALUES (?,?,?,?)",
                              [(ids[(hexid, vid)], ns, o, cl) for vid, spans in f.spans(cid).items()
                               for o, cl in spans])
            c.execute("UPDATE pmem_vec_position SET position=? WHERE name=?", (stop, NAME))

    @staticmethod
    def _vector_ids(c: Any, cells: list[UUID]) -> dict[tuple[str, int], int]:
        out: dict[tuple[str, int], int] = {}
        hexes = [cid.hex for cid in cells]
        for i in range(0, len(hexes), 500):
            chunk = hexes[i:i + 500]
            c.execute(f"SELECT cell, vid, vector_id FROM pmem_vec_versions WHERE cell IN "
                      f"({','.join('?' * len(chunk))})", chunk)
            out.update({(cell, vid): vector_id for cell, vid, vector_id in c.fetchall()})
        return out

    def _tx(self, *, commit: bool) -> AbstractContextManager[Any]:
        return _transaction(self.log, commit)


def stored_position(conn: sqlite3.Connection) -> int:
    """The position the tables in this file record, without creating them (0 when they are missing):
    ``pmem stats`` reports it and must not write."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name='pmem_vec_position'").fetchone() is None:
        return 0
    row = conn.execute("SELECT position FROM pmem_vec_position WHERE name=?", (NAME,)).fetchone()
    return 0 if row is None else int(row[0])


def _position(c: Any) -> int:
    c.execute("SELECT position FROM pmem_vec_position WHERE name=?", (NAME,))
    row = c.fetchone()
    return 0 if row is None else int(row[0])


def _version_rows(new: list[NewVector]) -> Iterator[tuple[int, str, int, str, str, str]]:
    for n in new:
        yield n.vector_id, n.cell.hex, n.vid, n.namespace, n.key, n.text


@contextmanager
def _transaction(log: EventLog, commit: bool) -> Iterator[Any]:
    """A transaction on the log's own connection pool; library errors become :class:`StoreUnavailable`."""
    try:
        with log.recorder.datastore.transaction(commit=commit) as c:
            yield c
    except (PersistenceError, sqlite3.Error) as e:
        raise StoreUnavailable(f"cannot use the vector tables in {log.db}: {e}") from e
