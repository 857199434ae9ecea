"""The vector projection's tables, kept next to the log (the store's SQLite file or PostgreSQL schema).

    pmem_tracking      (name='vectors', position, version)   the event index the tables reflect
    pmem_vec_versions  (vector_id, cell, vid, namespace, key, text)   one row per version ever created
    pmem_vec_intervals (vector_id, namespace, opened_at, closed_at)   open intervals, closed_at NULL = open

The tables are written in one transaction together with their position, kept in the tracking table
every projection shares (:mod:`.tracked_projection`), so they always describe exactly the events up to
it. Catching up reads the events after the position, folds them with
:class:`projections.vectors.VectorFold` (starting from the touched cells' earlier events) and
replaces the touched cells' intervals. Eligibility at event index N is a plain query: the versions
with an interval ``opened_at <= N < closed_at``; what changed between two indices is the versions
with an interval boundary between them (both columns are indexed).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

from pmem.adapters.progress import Progress, silent
from pmem.adapters.readmodels import screening
from pmem.adapters.readmodels.registry import VECTORS
from pmem.adapters.readmodels.screening import Stop
from pmem.adapters.readmodels.tracked_projection import (
    TRACKING,
    WRITE_LOCK,
    TrackedProjection,
    tracked_position,
)
from pmem.adapters.storage.projection_db import ProjectionDb, as_db
from pmem.domain.errors import StoreUnavailable
from pmem.domain.state import FORGOTTEN_TEXT
from pmem.projections.replay import IndexedEvent, Timeline, fold
from pmem.projections.vectors import NewVector, VectorFold, version_text

if TYPE_CHECKING:
    from pmem.adapters.eventstore.eventlog import EventLog

NAME = VECTORS
OLD_POSITION_TABLE = "pmem_vec_position"  # where stores written before the shared tracking table kept it
CHUNK = 20_000  # events folded per step of a catch-up


def schema(int_type: str) -> tuple[str, ...]:
    return (
        f"CREATE TABLE IF NOT EXISTS pmem_vec_versions (vector_id {int_type} PRIMARY KEY, cell TEXT NOT NULL, "
        f"vid {int_type} NOT NULL, namespace TEXT NOT NULL, key TEXT NOT NULL, text TEXT NOT NULL, "
        "UNIQUE (cell, vid))",
        f"CREATE TABLE IF NOT EXISTS pmem_vec_intervals (vector_id {int_type} NOT NULL, namespace TEXT NOT NULL, "
        f"opened_at {int_type} NOT NULL, closed_at {int_type})",
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


class VectorProjection(TrackedProjection):
    """Positioned tables of versions and open intervals over one :class:`EventLog`, in ``db`` (by
    default a connection of its own to the log's database). Its catch-up folds a chunk outside the
    write lock and writes it under the lock only if the position has not moved meanwhile (another
    process's catch-up wins, and this one's fold is discarded)."""

    name = NAME
    version = 1

    def __init__(self, log: EventLog, chunk: int = CHUNK, db: ProjectionDb | None = None) -> None:
        self.applied = 0  # events this object folded and committed (not those another process did)
        self.forgotten = 0  # cells this object found forgotten while folding (their vectors must go)
        self._owned = db is None
        self._lock = threading.RLock()  # one connection: one transaction at a time across threads
        self.db = log.backend.connect_projections() if db is None else as_db(db)
        super().__init__(self.db, log, None, batch_size=chunk)
        self.chunk = chunk  # events folded and committed per transaction

    def create_tables(self) -> None:
        with self._tx(write=True) as c:
            self._create_tracking()
            for stmt in schema(self.db.int_type):
                c.execute(stmt)
            if OLD_POSITION_TABLE in c.names():  # carry the position over once, then drop the old table
                row = c.execute(f"SELECT position FROM {OLD_POSITION_TABLE} WHERE name=?", (NAME,)).fetchone()
                if row is not None:
                    c.execute(f"INSERT INTO {TRACKING} VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                              (NAME, row[0], self.version))
                c.execute(f"DROP TABLE {OLD_POSITION_TABLE}")

    def close(self) -> None:
        if self._owned:
            self.db.close()

    # -- reading -------------------------------------------------------------
    def position(self) -> int:
        with self._tx() as c:
            return _position(c)

    def count(self) -> int:
        """Vectors so far; ids are ``0 .. count-1``."""
        with self._tx() as c:
            return int(c.execute("SELECT COALESCE(MAX(vector_id) + 1, 0) FROM pmem_vec_versions").fetchone()[0])

    def texts(self, start: int, stop: int) -> list[str]:
        """Texts of vectors ``start <= id < stop``, by id."""
        with self._tx() as c:
            return [r[0] for r in c.execute("SELECT text FROM pmem_vec_versions WHERE vector_id>=? AND "
                                            "vector_id<? ORDER BY vector_id", (start, stop)).fetchall()]

    def eligible(self, namespace: str, as_of: int) -> list[Eligible]:
        """Versions of the namespace open at event index ``as_of`` (caught up to at least it), by id."""
        with self._tx() as c:
            rows = c.execute(
                "SELECT i.vector_id, v.cell, v.key, v.vid FROM pmem_vec_intervals i "
                "JOIN pmem_vec_versions v ON v.vector_id = i.vector_id "
                "WHERE i.namespace=? AND i.opened_at<=? AND (i.closed_at IS NULL OR i.closed_at>?) "
                "ORDER BY i.vector_id", (namespace, as_of, as_of)).fetchall()
            return [Eligible(*row) for row in rows]

    def changes(self, namespace: str, since: int, at: int) -> list[tuple[Eligible, bool]]:
        """The versions of the namespace that may be open at ``at`` but not at ``since`` or the
        reverse (one of their intervals opened or closed in between), each with whether it is open
        at ``at``. Applied to the versions open at ``since``, they give those open at ``at``."""
        with self._tx() as c:
            rows = c.execute(
                "SELECT v.vector_id, v.cell, v.key, v.vid, "
                "MAX(CASE WHEN i.opened_at<=? AND (i.closed_at IS NULL OR i.closed_at>?) THEN 1 ELSE 0 END) "
                "FROM pmem_vec_intervals i JOIN pmem_vec_versions v ON v.vector_id = i.vector_id "
                "WHERE i.vector_id IN (SELECT vector_id FROM pmem_vec_intervals WHERE namespace=? "
                "AND opened_at>? AND opened_at<=? UNION SELECT vector_id FROM pmem_vec_intervals "
                "WHERE namespace=? AND closed_at>? AND closed_at<=?) "
                "GROUP BY v.vector_id, v.cell, v.key, v.vid",
                (at, at, namespace, since, at, namespace, since, at)).fetchall()
            return [(Eligible(*row[:4]), bool(row[4])) for row in rows]

    # -- catching up ---------------------------------------------------------
    def catch_up(self, target: int | None = None, progress: Progress = silent) -> int:
        """Fold every event after the position (up to ``target``, default the end of the log) into the
        tables; return the new position. ``progress`` is told how far each committed chunk moved it."""
        timelines: dict[UUID, Timeline] = {}  # cells folded so far in this call, kept across chunks
        if screening.has_table(self.db):  # no stops table: no projection ever stopped, nothing to resume
            self._resume()
        bar = progress(NAME, max(self.log.last_index() - self.position(), 0))
        try:
            while True:
                start = self.position()
                last = self.log.last_index() if target is None else min(target, self.log.last_index())
                if last <= start:
                    return start
                stop = min(last, start + self.chunk)
                try:
                    reached = self._fold_and_write(start, stop, timelines)
                except _Moved:
                    timelines.clear()
                    continue
                bar.update(self.position() - start)
                if reached < stop:
                    return reached  # halted before an event whose namespace cannot be read
        finally:
            bar.close()

    def reset(self) -> None:
        """Forget everything: the next catch-up replays the log from index 1."""
        with self._tx(write=True) as c:
            for table in ("pmem_vec_versions", "pmem_vec_intervals"):
                c.execute(f"DELETE FROM {table}")
            self._forget_position()
            screening.remove(c, self.name)

    def _fold_and_write(self, start: int, stop: int, timelines: dict[UUID, Timeline],
                        resumed: Stop | None = None, events: list[IndexedEvent] | None = None) -> int:
        """Fold events ``start+1 .. stop`` (screened, :mod:`.screening`; return the index reached);
        ``timelines`` holds cells already folded up to ``start`` (it is updated in place); other
        touched cells are loaded and folded from the log. Resuming the stop ``resumed``, ``events``
        are its namespace's events from its index up to the position ``start``, and the position stays."""
        if events is None:
            events, stop = self._screened_batch(start, stop)
        touched = list({e.originator_id for _, e in events})
        missing = [cid for cid in touched if cid not in timelines]
        upto = start if resumed is None else resumed.index - 1
        timelines.update(fold(ev for evs in self.log.cell_events(missing, upto=upto).values() for ev in evs))
        with self._tx() as c:
            f = VectorFold(timelines, int(c.execute("SELECT COALESCE(MAX(vector_id) + 1, 0) FROM "
                                                    "pmem_vec_versions").fetchone()[0]))
            ids = self._vector_ids(c, touched)
        f.apply_all(events)
        for n in f.new:
            ids[(n.cell.hex, n.vid)] = n.vector_id
        with self._tx(write=True) as c:
            # Under the write lock, check nobody moved the position meanwhile.
            c.execute(f"INSERT INTO {TRACKING} VALUES (?, 0, ?) ON CONFLICT DO NOTHING", (NAME, self.version))
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
            forgotten = sorted({e.originator_id.hex for _, e in events if e.OP == "forget"})
            for hexid in forgotten:  # the versions' texts are forgotten (their vectors: VectorSearch)
                c.execute("UPDATE pmem_vec_versions SET text = ? WHERE cell = ?",
                          (version_text(f.timelines[UUID(hexid)].state.key, FORGOTTEN_TEXT), hexid))
            if resumed is None:
                self._move_position(stop)
            else:
                self._resumed(resumed, events)
        self.applied += stop - start
        self.forgotten += len(forgotten)
        return stop

    def _reapply(self, stop: Stop) -> int:
        position = self.position()
        events = self._namespace_events(stop, position)
        try:
            self._fold_and_write(position, position, {}, stop, events)
        except _Moved:
            return 0
        return len(events)

    @staticmethod
    def _vector_ids(c: Any, cells: list[UUID]) -> dict[tuple[str, int], int]:
        out: dict[tuple[str, int], int] = {}
        hexes = [cid.hex for cid in cells]
        for i in range(0, len(hexes), 500):
            chunk = hexes[i:i + 500]
            rows = c.execute(f"SELECT cell, vid, vector_id FROM pmem_vec_versions WHERE cell IN "
                             f"({','.join('?' * len(chunk))})", chunk).fetchall()
            out.update({(cell, vid): vector_id for cell, vid, vector_id in rows})
        return out

    @contextmanager
    def _tx(self, *, write: bool = False) -> Iterator[ProjectionDb]:
        """One transaction (a write under the projections' write lock, else a consistent read);
        driver errors become :class:`StoreUnavailable`."""
        with self._lock:
            try:
                with self.db.write(WRITE_LOCK) if write else self.db.snapshot():
                    yield self.db
            except self.db.errors as e:
                raise StoreUnavailable(f"cannot use the vector tables in {self.log.db}: {e}") from e


def _position(c: Any) -> int:
    return tracked_position(c, NAME)


def _version_rows(new: list[NewVector]) -> Iterator[tuple[int, str, int, str, str, str]]:
    for n in new:
        yield n.vector_id, n.cell.hex, n.vid, n.namespace, n.key, n.text

