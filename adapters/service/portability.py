"""Moving a log between stores: export, import, copy (export piped into import), verify, online backup.

An import appends the exported events verbatim (same indices, cells, revisions, topics, class
versions and payloads), the op-id table and the live data keys into an EMPTY store, all in one
transaction, then rebuilds the projections from the imported log: every ``as_of`` and every receipt
of the source stays valid in the target, on either backend. The format and its checks are
:mod:`pmem.adapters.eventstore.portable`; the SQL, :mod:`pmem.adapters.eventstore.portable_sql`.
Nothing here holds the log: lines are produced and consumed one at a time (``docs/portability.md``).
"""

from __future__ import annotations

import os
import random
import sqlite3
from collections.abc import Generator, Iterable, Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

from pmem.adapters.eventstore import portable as fmt
from pmem.adapters.eventstore.portable_sql import SQLITE, PgSink, PgSnapshot, SqliteSink, SqliteSnapshot
from pmem.adapters.progress import Progress, silent
from pmem.adapters.readmodels.registry import FRONTIER, GRAPH, LEXICAL
from pmem.adapters.storage.backend import PgBackend, SqliteBackend, open_backend
from pmem.domain.errors import InvalidOperation, StoreError, StoreUnavailable

REBUILT = (FRONTIER, GRAPH, LEXICAL)  # the vector projection embeds on the first search, as on any new store
VERIFY_SAMPLES = 8
TICK = 10_000  # events between progress-bar updates


class VerifyFailed(StoreError):
    kind = "verify failed"


def _snapshot(db: str | Path) -> SqliteSnapshot | PgSnapshot:
    backend = open_backend(db)
    if isinstance(backend, PgBackend):
        return PgSnapshot(backend.conninfo, backend.schema)
    if backend.path is None or not backend.path.is_file():
        raise StoreUnavailable(f"cannot export {backend.label}: no such store file")
    try:
        return SqliteSnapshot(str(backend.path.resolve()))
    except sqlite3.Error as e:
        raise StoreUnavailable(f"cannot read {backend.label}: {e}") from e


def export_lines(db: str | Path, *, after: int = 0, namespace: str | None = None,
                 progress: Progress = silent) -> Iterator[bytes]:
    """The export of ``db`` (events after ``after``; of one ``namespace`` only, if given), line by line,
    read in one snapshot."""
    snap = _snapshot(db)
    try:
        yield fmt.header_line(snap.source, snap.key_edition, snap.since, after, namespace, snap.last_index)
        cells: set[str] | None = None if namespace is None else set()
        events = _events_of(snap.events(after), namespace, cells)
        n = yield from _counted(events, fmt.event_line, progress("export", max(snap.last_index - after, 0)))
        ops = (r for r in snap.op_ids(after) if namespace is None or r[0] == namespace)
        n_ops = yield from _counted(ops, fmt.op_id_line)
        keys = (r for r in snap.keys() if cells is None or r[0] in cells)
        n_keys = yield from _counted(keys, fmt.key_line)
        yield fmt.end_line(n, n_ops, n_keys)
    finally:
        snap.close()


def _events_of(rows: Iterable[fmt.EventRow], namespace: str | None, cells: set[str] | None) -> Iterator[fmt.EventRow]:
    if namespace is None:
        yield from rows
        return
    import orjson

    for row in rows:
        if orjson.loads(row[4]).get("namespace") == namespace:
            assert cells is not None
            cells.add(row[1])
            yield row


def _counted(rows: Iterable[Any], line: Any, bar: Any = None) -> Generator[bytes, None, int]:
    """``line(row)`` of each row; returns how many (``yield from`` hands it back)."""
    n = 0
    for row in rows:
        yield line(row)
        n += 1
        if bar is not None and n % TICK == 0:
            bar.update(TICK)
    if bar is not None:
        bar.update(n % TICK)
        bar.close()
    return n


def import_lines(db: str | Path, lines: Iterable[bytes], name: str, *, progress: Progress = silent,
                 synchronous: str = "FULL") -> dict[str, Any]:
    """Import an export into the empty store ``db`` (all or nothing), then rebuild its projections."""
    out = import_log(db, lines, name, progress=progress, synchronous=synchronous)
    out["rebuilt"] = rebuild(db, progress)
    return out


def import_log(db: str | Path, lines: Iterable[bytes], name: str, *, progress: Progress = silent,
               synchronous: str = "FULL") -> dict[str, Any]:
    """The log part of :func:`import_lines`: the events, op ids, keys and key edition, in one transaction."""
    reader = fmt.ExportReader(lines, name)  # the header is checked before the target is touched
    backend = open_backend(db)
    created = _new_file(backend)
    try:
        sink = _sink(db, backend, synchronous)
    except BaseException:
        _remove_new(backend, created)
        raise
    try:
        _fill(sink, reader, progress)
    except BaseException:
        sink.rollback()
        _remove_new(backend, created)
        raise
    sink.commit()
    return {"imported": reader.counts["events"], "op_ids": reader.counts["op_ids"], "keys": reader.counts["keys"],
            "last_index": reader.last_index, "key_edition": reader.header["key_edition"]}


def _fill(sink: SqliteSink | PgSink, reader: fmt.ExportReader, progress: Progress) -> None:
    bar = progress("import", reader.last_index)
    try:
        events = _ticking(reader.events(), bar)
        sink.events(events if isinstance(sink, SqliteSink) else _with_uuids(events))
        sink.op_ids(reader.op_ids())
        sink.keys(reader.keys())
    except _integrity_errors() as e:
        raise reader.fail(f"repeats a row already imported ({_first_line(e)})") from None
    except _database_errors() as e:  # a value the target's column refuses (a NUL in a PostgreSQL text, say)
        raise reader.fail(f"the target refuses this line: {_first_line(e)}") from None
    finally:
        bar.close()
    reader.finish()
    sink.meta(int(reader.header["key_edition"]), reader.header.get("key_edition_since"))


def _with_uuids(rows: Iterable[fmt.EventRow]) -> Iterator[tuple[Any, ...]]:
    """PostgreSQL's binary COPY takes a cell id as a UUID."""
    for index, cell, rev, topic, state in rows:
        yield index, UUID(cell), rev, topic, state


def _ticking(rows: Iterator[fmt.EventRow], bar: Any) -> Iterator[fmt.EventRow]:
    for n, row in enumerate(rows, 1):
        if n % TICK == 0:
            bar.update(TICK)
        yield row


def _integrity_errors() -> tuple[type[BaseException], ...]:
    try:
        import psycopg
    except ImportError:
        return (sqlite3.IntegrityError,)
    return sqlite3.IntegrityError, psycopg.IntegrityError


def _database_errors() -> tuple[type[BaseException], ...]:
    try:
        import psycopg
    except ImportError:
        return (sqlite3.DataError,)
    return sqlite3.DataError, psycopg.DataError


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def _new_file(backend: Any) -> bool:
    return isinstance(backend, SqliteBackend) and backend.path is not None and not backend.path.exists()


def _sink(db: str | Path, backend: Any, synchronous: str) -> SqliteSink | PgSink:
    """Make the target's tables (opening its event log once), then open the import transaction."""
    from pmem.adapters.eventstore.eventlog import EventLog

    EventLog(db).close()
    if isinstance(backend, PgBackend):
        import psycopg

        try:
            return PgSink(backend.conninfo, backend.schema, backend.label)
        except psycopg.Error as e:
            raise StoreUnavailable(f"cannot import into {backend.label}: {e}") from e
    try:
        return SqliteSink(backend.db, synchronous)
    except sqlite3.Error as e:
        raise StoreUnavailable(f"cannot import into {backend.label}: {e}") from e


def _remove_new(backend: Any, created: bool) -> None:
    """A failed import into a file it created leaves no file behind."""
    if created:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{backend.path}{suffix}").unlink(missing_ok=True)


def rebuild(db: str | Path, progress: Progress = silent) -> dict[str, Any]:
    from pmem.adapters.service.store import Store

    with Store(db, progress=progress) as store:  # the path of `pmem rebuild` (graph and full-text in one pass)
        events = store._admin.rebuild_selected(REBUILT)
    return {name: events for name in REBUILT}


def copy(source: str | Path, target: str, *, verify: bool = False, progress: Progress = silent) -> dict[str, Any]:
    """Export ``source`` straight into the empty store ``target`` (no file between them)."""
    if str(source) == str(target):
        raise InvalidOperation(f"cannot copy {source} onto itself", field="to")
    out = import_lines(target, export_lines(source, progress=progress), str(source), progress=silent)
    if verify:
        out["verified"] = verify_stores(source, target)
    return out


def verify_stores(source: str | Path, target: str | Path, samples: int = VERIFY_SAMPLES,
                  source_reader: str = "projection") -> list[int]:
    """Compare ``frontier --as-of N`` (every namespace, system cells included) of two stores at sampled
    N (always the last index); :class:`VerifyFailed` names the first N that differs."""
    from pmem.adapters.service.store import Store

    with Store(source, reader=source_reader) as a, Store(target) as b:
        last = a.last_index()
        if b.last_index() != last:
            raise VerifyFailed(f"verify: {target} ends at index {b.last_index()}, {source} at {last}")
        points = sorted({last, *random.Random(last).sample(range(1, last + 1), min(samples, last))}) if last else []
        namespaces = [r[0] for r in b.projection_db.execute("SELECT DISTINCT namespace FROM cells").fetchall()]
        for n in points:
            for ns in namespaces:
                mine = [v.to_dict() for v in a.frontier(as_of=n, namespace=ns, system=True)]
                theirs = [v.to_dict() for v in b.frontier(as_of=n, namespace=ns, system=True)]
                if mine != theirs:
                    raise VerifyFailed(f"verify: frontier --as-of {n} of namespace {ns!r} differs between "
                                       f"{source} and {target}")
        return points


def backup(db: str | Path, path: str | Path) -> dict[str, Any]:
    """An online, consistent copy of a SQLite store in ``path`` (which must not exist), taken with
    SQLite's backup API in one step (one read snapshot: writers go on meanwhile), checked with
    ``integrity_check`` and moved into place only when whole."""
    backend = open_backend(db)
    if isinstance(backend, PgBackend):
        raise InvalidOperation("pmem backup copies a SQLite store; back a PostgreSQL store up with pg_dump "
                               "(logical) or pg_basebackup (physical), see docs/portability.md", field="db")
    if backend.path is None or not backend.path.is_file():
        raise StoreUnavailable(f"cannot back up {backend.label}: no such store file")
    dest = Path(path)
    try:
        exists, parent = dest.exists(), dest.resolve().parent
        missing = not parent.is_dir()
    except OSError as e:  # a name too long for the file system, a folder that cannot be searched...
        raise InvalidOperation(f"backup target {dest}: {e.strerror or type(e).__name__}", field="path") from None
    if exists:
        raise InvalidOperation(f"backup target {dest} exists: name a new file", field="path")
    if missing:
        raise InvalidOperation(f"backup target {dest}: directory {parent} does not exist", field="path")
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.partial")
    try:
        last = _backup_to(str(backend.path), str(tmp))
        os.replace(tmp, dest)
    except sqlite3.Error as e:
        raise StoreUnavailable(f"cannot back up {backend.label}: {e}") from e
    finally:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{tmp}{suffix}").unlink(missing_ok=True)
    return {"backup": str(dest), "last_index": last, "bytes": dest.stat().st_size, "integrity": "ok"}


def _backup_to(source: str, tmp: str) -> int:
    src = sqlite3.connect(source, timeout=60)
    dst = sqlite3.connect(tmp)
    try:
        src.backup(dst)  # pages=-1: every page in one step, so one snapshot of the source
        dst.execute("PRAGMA journal_mode=DELETE")  # the copy is one self-contained file
        check = dst.execute("PRAGMA integrity_check").fetchone()[0]
        if check != "ok":
            raise StoreUnavailable(f"the backup of {source} fails integrity_check: {check}")
        return int(dst.execute(SQLITE.log.last_index()).fetchone()[0])
    finally:
        dst.close()
        src.close()
