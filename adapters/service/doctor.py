"""The doctor use case (``pmem doctor``, ``Store.doctor()``): checks of one store, each with the fix it needs.

Every check answers ``{"check", "ok", "detail", "fix"}``; ``fix`` names the command that repairs what
failed (None when nothing needs doing). The doctor reads only: it catches nothing up and writes
nothing, so it works on a read-only file, and a check whose data cannot be read fails with the reason.

- ``integrity``: SQLite's ``PRAGMA integrity_check`` on the store's file (PostgreSQL: not applicable;
  the server's own tool is ``amcheck`` / ``pg_amcheck``);
- ``event_indices``: the log's event indices run 1, 2, 3, ... to its last with none missing (a
  backup, a copy or an import must be a gapless prefix of the log it came from; docs/portability.md);
- ``cell_state``: the compact cell state (:mod:`pmem.adapters.eventstore.cell_state`) reflects the whole
  log, and the state of a sample of cells (drawn through random events) is the one folded from their events;
- ``projections``: a sample of cells (up to :data:`SAMPLE_CELLS`, half of them drawn from the frontier
  projection's cells and half through random events of the log) read from the frontier projection and
  folded from the log (:func:`pmem.projections.replay.fold`), both at the projection's position;
- ``shadow_tables``: tables a killed rebuild left (``*__rebuild``);
- ``workers``: heartbeat rows (:mod:`pmem.adapters.readmodels.heartbeat`) of workers that died running;
- ``rebuild_workers``: rebuild worker processes on this store whose parent is gone;
- ``lag``: each projection's position against the log (informational; a projection ahead fails);
- ``key_edition``: the key rule the store keeps (informational).

:func:`write_checked` is the cheap part of the integrity check that the write path runs: ``PRAGMA
quick_check`` once per open store, before its first write, on a SQLite file of at most
:data:`QUICK_CHECK_MAX_BYTES` (docs/reliability.md gives the cost).
"""

from __future__ import annotations

import os
import random
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from uuid import UUID

from pmem.adapters.eventstore.log_sql import STATE_AT, LogSql, PgDialect, SqliteDialect
from pmem.adapters.eventstore.stored_log import read_only
from pmem.adapters.readmodels import screening
from pmem.adapters.readmodels.heartbeat import workers
from pmem.adapters.readmodels.projection_reader import ProjectionReader
from pmem.adapters.readmodels.registry import FRONTIER, PROJECTION_NAMES
from pmem.adapters.readmodels.tracked_projection import tracked_position
from pmem.adapters.service.bootstrap import Wiring
from pmem.adapters.storage.projection_db import SqliteDb
from pmem.domain.errors import InvalidOperation, StoreUnavailable
from pmem.domain.keys import KEY_EDITION, KEY_EDITIONS
from pmem.projections.replay import fold

if TYPE_CHECKING:
    from pmem.adapters.eventstore.eventlog import EventLog

SAMPLE_CELLS = 200  # cells the projections check compares with a replay of the log
SHOWN = 5  # mismatching keys (or tables, workers, processes) a detail names
SHADOW = "__rebuild"  # the end of every shadow table's name (readmodels.sqlite_projection.SHADOW)
REBUILD_WORKER = "pmem.adapters.readmodels.parallel_rebuild"  # in a rebuild worker's command line
QUICK_CHECK_MAX_BYTES = 32 << 20  # the largest file the write path quick_checks ($PMEM_WRITE_CHECK_MAX_MB)
REBUILD_FRONTIER = "pmem rebuild --projection frontier"

Check = dict[str, Any]


def result(check: str, ok: bool, detail: str, fix: str | None = None) -> Check:
    return {"check": check, "ok": ok, "detail": detail, "fix": None if ok else fix}


class Doctor:
    """The checks of one store (every namespace); reads only."""

    def __init__(self, wiring: Wiring) -> None:
        self.w = wiring
        self.lock = wiring.lock  # a closed store's wiring raises StoreClosed here, not inside a check

    @property
    def sqlite(self) -> bool:
        return isinstance(self.w.projection_db, SqliteDb)

    def run(self, sample: int = SAMPLE_CELLS) -> list[Check]:
        """Every check, in order; one that cannot read what it checks fails with the reason."""
        if isinstance(sample, bool) or not isinstance(sample, int) or not 0 <= sample <= 1_000_000:
            raise InvalidOperation(f"sample must be a number of cells from 0 to 1000000, got {sample!r}",
                                   field="sample")
        checks: list[tuple[str, Callable[[], Check], str | None]] = [
            ("integrity", self.integrity, None),
            ("event_indices", self.event_indices, None),
            ("cell_state", lambda: self.cell_state(sample), None),
            ("projections", lambda: self.projections(sample), REBUILD_FRONTIER),
            ("shadow_tables", self.shadow_tables, REBUILD_FRONTIER),
            ("workers", self.stale_workers, None),
            ("rebuild_workers", self.rebuild_workers, None),
            ("lag", self.lag, None),
            ("stopped", self.stopped, None),
            ("key_edition", self.key_edition, None),
        ]
        out = []
        for name, check, fix in checks:
            try:
                with self.lock:  # one projection connection, shared with the store's other users
                    out.append(check())
            except Exception as e:  # noqa: BLE001 - whatever stops a check is its answer
                out.append(result(name, False, f"cannot check: {_first_line(e)}",
                                  fix or "pmem doctor again once the store can be read"))
        return out

    # -- the checks ---------------------------------------------------------------------------
    def integrity(self) -> Check:
        if not self.sqlite:
            return result("integrity", True, "not applicable on PostgreSQL: the server keeps its files; check "
                          "them with its amcheck extension (pg_amcheck DBNAME)")
        raw = cast(SqliteDb, self.w.projection_db).raw
        try:
            problems = [_one_line(str(r[0])) for r in raw.execute("PRAGMA integrity_check").fetchall()]
        except sqlite3.OperationalError:
            raise  # locked or unreadable: no verdict (run() reports it)
        except sqlite3.DatabaseError as e:  # malformed beyond what the check can walk: that is the verdict
            problems = [_first_line(e)]
        if problems == ["ok"]:
            return result("integrity", True, "PRAGMA integrity_check: ok")
        shown = "; ".join(problems[:SHOWN])
        return result("integrity", False, f"PRAGMA integrity_check found {len(problems)} problem(s): {shown}",
                      "restore the store from a backup, or copy what is readable into a new file: "
                      f"sqlite3 {getattr(self.w.backend, 'label', 'STORE')} .recover | sqlite3 RECOVERED.db")

    def event_indices(self) -> Check:
        """The log's indices are 1..last with none missing: one count and the bounds, and where they
        disagree, the first missing index (an index scan, only then)."""
        sql = self._log_sql()
        db = self.w.projection_db
        count, first, last = db.execute(sql.log.index_bounds()).fetchone()
        if count == last and first in (0, 1):
            return result("event_indices", True, f"{count} events, indices 1 to {last} with none missing")
        missing = 1 if first != 1 else int(db.execute(sql.log.first_missing(), (last,)).fetchone()[0])
        return result("event_indices", False, f"{last - count} of the indices 1 to {last} are missing, the first "
                      f"{missing}: the log has lost events",
                      "restore the store from a backup that passes this check, or import an export of the "
                      "source again (docs/portability.md)")

    def cell_state(self, sample: int) -> Check:
        """The compact cell state reflects the log to its end, and a sample of cells' state records and
        chain rows are those folded from their events (each sampled cell's history is read once)."""
        log: EventLog = self.w.log.get()
        position, last = log.state_position()
        fix = self._state_reset()
        if position != last:
            return result("cell_state", False, f"the cell state reflects the log up to index {position}, but the "
                          f"log ends at {last}", fix)
        ids = self._cells_through_log(last, sample)
        wrong = log.state_mismatches(ids)
        if not wrong:
            return result("cell_state", True, f"the cell state reflects the log up to index {last}; "
                          f"{len(ids)} sampled cells match a fold of their events")
        return result("cell_state", False, f"{len(wrong)} of {len(ids)} sampled cells' state differs from a fold of "
                      f"their events (cell ids {', '.join(wrong[:SHOWN])})", fix)

    def _state_reset(self) -> str:
        """The fix of a cell state that is not the log's: forget where it stands, and the next pmem
        command that opens the log rebuilds it from the log."""
        label = getattr(self.w.backend, "label", "STORE")
        if self.sqlite:
            run = f'sqlite3 {label} "DELETE FROM {STATE_AT}"'
        else:
            run = f"psql {label.split('?')[0]} -c 'DELETE FROM {self._log_sql().state_at}'"
        return f"{run}, then pmem stats (opening the log rebuilds the cell state from it)"

    def _log_sql(self) -> LogSql:
        """The log's statements, for the projection connection (its own schema's tables on PostgreSQL)."""
        return LogSql(SqliteDialect() if self.sqlite else PgDialect(getattr(self.w.backend, "schema", "public")))

    def projections(self, sample: int) -> Check:
        """The frontier projection's view and history of sampled cells against a fold of their events,
        both as of the projection's position."""
        db = self.w.projection_db
        position = tracked_position(db, FRONTIER)
        if position == 0 or sample == 0:
            return result("projections", True, f"nothing to compare (frontier at {position}, sample {sample})")
        ids = self._sampled_cells(position, sample)
        log: EventLog = self.w.log.get()
        folded = fold(e for events in log.cell_events(ids, upto=position).values() for e in events)
        reader = ProjectionReader(db)
        wrong = []
        for cid in ids:
            projected, replayed = reader.timeline(cid, as_of=position), folded.get(cid)
            if _differ(projected, replayed):
                either = projected if replayed is None else replayed
                assert either is not None  # _differ: at least one of them is there
                cell = either.history()
                wrong.append(f"{cell.key!r} in {cell.namespace}")
        if not wrong:
            return result("projections", True, f"{len(ids)} sampled cells match a replay of the log up to index "
                          f"{position}")
        return result("projections", False, f"{len(wrong)} of {len(ids)} sampled cells differ from a replay of "
                      f"the log up to index {position}: {', '.join(wrong[:SHOWN])}", REBUILD_FRONTIER)

    def _sampled_cells(self, position: int, sample: int) -> list[UUID]:
        """Half the sample from the projection's cells, the rest through random events of the log (so a
        cell the projection lacks can be drawn too), without repeats."""
        db = self.w.projection_db
        rows = db.execute("SELECT cell_id FROM cells WHERE first_index <= ? ORDER BY random() LIMIT ?",
                          (position, max(sample // 2, 1))).fetchall() if "cells" in db.names() else []
        ids = {UUID(r[0]): None for r in rows}
        ids.update(dict.fromkeys(self._cells_through_log(position, sample - len(ids))))
        return list(ids)[:sample]

    def _cells_through_log(self, last: int, draws: int) -> list[UUID]:
        """The cells of ``draws`` random events up to index ``last``, without repeats."""
        ids: dict[UUID, None] = {}
        pick = random.Random()
        for _ in range(draws if last else 0):
            i = pick.randint(1, last)
            for row in self.w.events.rows(i, i, 1):
                ids.setdefault(UUID(row[1]), None)
        return list(ids)

    def shadow_tables(self) -> Check:
        found = sorted(n for n in self.w.projection_db.names() if n.endswith(SHADOW))
        if not found:
            return result("shadow_tables", True, "no shadow tables (*__rebuild)")
        fix = REBUILD_FRONTIER if self.sqlite else f"DROP TABLE {', '.join(found)} (a rebuild here makes none)"
        return result("shadow_tables", False, f"{len(found)} shadow table(s) left by an interrupted rebuild: "
                      f"{', '.join(found[:SHOWN])}", f"{fix} (once no rebuild is running)")

    def stale_workers(self) -> Check:
        stale = {n: w for n, w in workers(self.w.projection_db).items()
                 if w["state"] in ("starting", "running") and not w["alive"]}
        if not stale:
            return result("workers", True, "no worker died while running")
        shown = ", ".join(f"{n} (pid {w['pid']} on {w['host']}, last beat {w['beat_age_s']} s ago)"
                          for n, w in sorted(stale.items()))
        fix = " or ".join(f"pmem worker --projection {n}" for n in sorted(stale))
        return result("workers", False, f"worker(s) that stopped beating without stopping: {shown}",
                      f"{fix} (start it again; reads catch a projection up without one)")

    def rebuild_workers(self) -> Check:
        """Rebuild worker processes on this store whose rebuild has ended: their parent is gone (pid 1
        adopted them) or their shadow tables are (dropped by a later rebuild, or swapped in)."""
        if not self.sqlite:
            return result("rebuild_workers", True, "not applicable: a rebuild on PostgreSQL starts no processes")
        if not Path("/proc/self/cmdline").exists():
            return result("rebuild_workers", True, "not checked: no /proc to list processes on this system")
        store = str(self.w.projection_db.execute("PRAGMA database_list").fetchone()[2])
        found = rebuild_processes(store) if store else []
        names = self.w.projection_db.names()
        left = [pid for pid, parent, suffix in found
                if parent in (0, 1) or not Path(f"/proc/{parent}").exists() or f"cells{suffix}" not in names]
        running = [pid for pid, _, _ in found if pid not in left]
        if left:
            pids = " ".join(map(str, left))
            return result("rebuild_workers", False, f"rebuild worker process(es) whose rebuild has ended: {pids}",
                          f"kill {pids}")
        return result("rebuild_workers", True, f"a rebuild is running (worker pids {running})" if running
                      else "no rebuild worker processes")

    def lag(self) -> Check:
        last = self.w.events.last_index()
        positions = {name: tracked_position(self.w.projection_db, name) for name in PROJECTION_NAMES}
        ahead = [name for name, p in positions.items() if p > last]
        shown = ", ".join(f"{name} at {p} (lag {max(last - p, 0)})" for name, p in positions.items())
        if ahead:
            return result("lag", False, f"the log ends at {last} but {', '.join(ahead)} is ahead of it: {shown}",
                          " and ".join(f"pmem rebuild --projection {n}" for n in ahead))
        return result("lag", True, f"log at {last}; {shown} (a lagging projection catches up at its next read)")

    def stopped(self) -> Check:
        """A projection that met an event it cannot apply (:mod:`pmem.adapters.readmodels.screening`)."""
        found = [s for name in PROJECTION_NAMES for _, s in sorted(screening.stops(self.w.projection_db, name).items())]
        if not found:
            return result("stopped", True, "no projection stopped at an event it cannot apply")
        shown = "; ".join(f"{s.projection} at event {s.index} in "
                          f"{'every namespace' if not s.namespace else repr(s.namespace)}: {s.reason}"
                          for s in found[:SHOWN])
        indices = sorted({s.index for s in found})
        return result("stopped", False, f"{len(found)} stopped: {shown}",
                      f"upgrade pmem if a newer release wrote event(s) {', '.join(map(str, indices))}, else repair "
                      "or remove those rows (pmem log shows the events around them); the next read resumes")

    def key_edition(self) -> Check:
        edition = self.w.key_edition
        if edition not in KEY_EDITIONS:
            return result("key_edition", False, f"unknown key edition {edition!r} in pmem_meta",
                          "upgrade pmem (this version knows key editions "
                          f"{', '.join(map(str, KEY_EDITIONS))})")
        if edition == 1:
            return result("key_edition", True, "key edition 1: the store keeps the edition-1 key rule (it holds "
                          "events written before key editions were recorded)")
        current = " (the rule of new stores)" if edition == KEY_EDITION else ""
        return result("key_edition", True, f"key edition {edition}{current}")


def _differ(projected: Any, replayed: Any) -> bool:
    if projected is None or replayed is None:
        return projected is not replayed
    return bool(projected.view() != replayed.view() or projected.history() != replayed.history())


def rebuild_processes(store: str) -> list[tuple[int, int, str]]:
    """``(pid, parent pid, shadow suffix)`` of every process running the rebuild worker module on
    ``store`` (its job, the last argument, is a JSON object naming the store and the suffix)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile, or not ours to read
        if REBUILD_WORKER.encode() not in args:
            continue
        job = _job(args)
        if job.get("store") == store:
            found.append((int(entry.name), parent, str(job.get("suffix", ""))))
    return found


def _job(args: list[bytes]) -> dict[str, Any]:
    """The JSON object among a rebuild worker's arguments (empty when there is none)."""
    import orjson

    for arg in reversed(args):
        if arg.startswith(b"{"):
            try:
                job = orjson.loads(arg)
            except orjson.JSONDecodeError:
                continue
            if isinstance(job, dict):
                return job
    return {}


# -- the write path's check -----------------------------------------------------------------
class _CheckedLog:
    """The log as the write use case sees it: its first ``get`` quick_checks the store's file."""

    def __init__(self, wiring: Wiring) -> None:
        self._wiring, self._lock = wiring, threading.Lock()
        self._checked = False

    def get(self) -> EventLog:
        if not self._checked:
            with self._lock:
                if not self._checked:
                    refuse_damaged(self._wiring)
                    self._checked = True
        return self._wiring.log.get()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._wiring.log, name)


class _WriteWiring:
    """The wiring with the checked log in place of the log; every other part is the store's own."""

    def __init__(self, wiring: Wiring) -> None:
        self._wiring, self.log = wiring, _CheckedLog(wiring)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._wiring, name)


def write_checked(wiring: Wiring) -> Wiring:
    """``wiring`` for the write use case: before the first write, :func:`refuse_damaged` runs once."""
    return cast(Wiring, _WriteWiring(wiring))


def quick_check_limit() -> int:
    """The largest file (bytes) the write path quick_checks: ``$PMEM_WRITE_CHECK_MAX_MB`` (0: never),
    else :data:`QUICK_CHECK_MAX_BYTES`."""
    raw = os.environ.get("PMEM_WRITE_CHECK_MAX_MB")
    try:
        return QUICK_CHECK_MAX_BYTES if raw is None else max(int(float(raw) * (1 << 20)), 0)
    except ValueError:
        raise InvalidOperation(f"PMEM_WRITE_CHECK_MAX_MB must be a number of MiB, got {raw!r}",
                               field="PMEM_WRITE_CHECK_MAX_MB") from None


def refuse_damaged(wiring: Wiring) -> None:
    """Raise :class:`StoreUnavailable` when ``PRAGMA quick_check`` finds the store's SQLite file damaged
    (a file over :func:`quick_check_limit`, memory and PostgreSQL are not checked)."""
    db, path = wiring.projection_db, getattr(wiring.backend, "path", None)
    if not isinstance(db, SqliteDb) or path is None:
        return
    try:
        size = os.path.getsize(path)
    except OSError:
        return  # not there yet: the log creates it
    if size > quick_check_limit():
        return
    label = getattr(wiring.backend, "label", str(path))
    try:  # a connection of its own: the store's has a 64 MiB page cache, which makes the check slower
        conn = read_only(str(Path(path).resolve()))
        try:
            first = _one_line(str(conn.execute("PRAGMA quick_check(1)").fetchone()[0]))
        finally:
            conn.close()
    except sqlite3.OperationalError as e:  # locked, unreadable: not a verdict on the file's contents
        raise StoreUnavailable(f"cannot check store {label} before writing: {_first_line(e)}") from e
    except sqlite3.DatabaseError as e:  # malformed, not a database: the file's contents are the answer
        first = _first_line(e)
    if first != "ok":
        raise StoreUnavailable(f"store {label} is damaged: {first}; run pmem doctor")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]
