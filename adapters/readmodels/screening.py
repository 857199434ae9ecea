"""Events a projection cannot apply, and where that leaves the projection.

Appends are validated, so such an event comes from outside this release: one appended by a newer
release (an unknown topic, a higher class version), a row damaged or written outside P-Mem. Every
stored row a projection reads goes through :func:`screen` first: the one codec decodes it, and its
fields must have the types the event class declares. A row that fails stops its *namespace* in that
projection, recorded in ``pmem_stopped`` (projection, namespace, event index, reason): the projection
skips that event and every later event of the namespace and goes on with the others, so one bad row
never poisons another namespace's reads. Reads in the stopped namespace, from that index on, raise
:class:`~pmem.domain.errors.ProjectionStopped` naming the index and the reason. A row whose namespace
cannot be read stops the whole projection at the event before it (namespace ``""``, which no real
namespace can be). Once the row reads (repaired, or read by a release that knows it), the next
catch-up applies the namespace's skipped events and removes the stop (see
:meth:`pmem.adapters.readmodels.tracked_projection.TrackedProjection.catch_up`).
"""

from __future__ import annotations

import sqlite3
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any
from weakref import WeakKeyDictionary

import orjson

from pmem.adapters.eventstore import codec
from pmem.adapters.storage.projection_db import ProjectionDb
from pmem.domain.errors import ProjectionStopped
from pmem.domain.event_schema import upcast
from pmem.projections.replay import IndexedEvent

STOPPED = "pmem_stopped"
_KNOWN: WeakKeyDictionary[Any, tuple[int, bool]] = WeakKeyDictionary()  # SQLite: schema version -> table there
EVERY_NAMESPACE = ""  # the namespace of a stop whose event's namespace could not be read
PAGE = 5_000
RawRow = tuple[int, str, int, str, bytes]  # (event index, cell id hex, cell revision, topic, state)


@dataclass(frozen=True)
class Stop:
    """Projection ``projection`` stopped, in ``namespace`` (``""``: every one), at event ``index``."""

    projection: str
    namespace: str
    index: int
    reason: str

    def error(self) -> ProjectionStopped:
        where = "every namespace" if self.namespace == EVERY_NAMESPACE else f"namespace {self.namespace!r}"
        return ProjectionStopped(
            f"projection {self.projection} stopped at event {self.index} in {where}: {self.reason} "
            "(written by a newer release, or damaged; repair or remove that row, or upgrade pmem; "
            "see pmem doctor)")

    def as_dict(self) -> dict[str, Any]:
        return {"namespace": self.namespace or None, "index": self.index, "reason": self.reason}


def row_namespace(state: bytes) -> str | None:
    """The namespace a stored row names, or None when it cannot be read (no decoding of the event)."""
    try:
        d = orjson.loads(state)
    except orjson.JSONDecodeError:
        return None
    ns = d.get("namespace") if isinstance(d, dict) else None
    return ns if isinstance(ns, str) and ns else None


def screen(row: RawRow, keys: Any = None) -> tuple[str | None, IndexedEvent | Stop]:
    """The namespace a stored row names (None when unreadable) and its event, sealed fields opened with
    ``keys`` (:mod:`pmem.adapters.eventstore.sealing`), or a :class:`Stop` (projection name left empty)
    saying why it cannot be applied. The row is parsed once."""
    index, hexid, revision, topic, state = row
    ns: str | None = None
    try:
        d = orjson.loads(state)
        if not isinstance(d, dict):
            raise ValueError("the stored event is not a JSON object")
        ns = d.get("namespace") if isinstance(d.get("namespace"), str) and d.get("namespace") else None
        codec.opened(topic, d, hexid, revision, keys)
        version = d.pop("class_version", 1)
        if not isinstance(version, int) or version > codec.CLASS_VERSION:
            raise ValueError(f"class version {version!r} is not one this release reads "
                             f"(1 to {codec.CLASS_VERSION})")
        cls = codec.event_class(topic)
        d = d if version == codec.CLASS_VERSION else upcast(d, version)
        _check_fields(cls, d)
        return ns, (index, codec.event_from_fields(cls, d, hexid, revision))
    except Exception as e:  # noqa: BLE001  (whatever it is, this event cannot be applied: say why)
        return ns, Stop("", ns or EVERY_NAMESPACE, index, reason_of(e))


def screened(log: Any, start: int, stop: int, skip: Mapping[str, int],
             only: str | None = None) -> Iterator[IndexedEvent | Stop]:
    """The events ``start..stop`` of ``log`` (an :class:`~pmem.adapters.eventstore.eventlog.EventLog`),
    each screened; rows of a namespace in ``skip`` from its index on are left out, and so is every
    row not of namespace ``only`` (when given). A stop is yielded in place of its row; the caller
    adds it to ``skip`` before asking for the next one."""
    keys = getattr(log, "keys", None)  # the data keys of sealed events (a log of raw rows has none)
    while start <= stop:
        rows = log.rows(start, stop, PAGE)
        if keys is not None:
            keys.refresh(r[1] for r in rows)
        for row in rows:
            ns, screened_row = screen(row, keys)
            if ns is not None and (row[0] >= skip.get(ns, row[0] + 1) or (only is not None and ns != only)):
                continue
            yield screened_row
        if len(rows) < PAGE:
            return
        start = rows[-1][0] + 1


def unappliable(index: int, event: Any, e: Exception) -> Stop:
    """The stop for an event that decoded but could not be applied (``e``: what applying it raised)."""
    ns = getattr(event, "namespace", None)
    return Stop("", ns if isinstance(ns, str) and ns else EVERY_NAMESPACE, index, reason_of(e))


# -- the stops table ---------------------------------------------------------------
def create_table(conn: ProjectionDb) -> None:
    conn.execute(f"CREATE TABLE IF NOT EXISTS {STOPPED} (name TEXT NOT NULL, namespace TEXT NOT NULL, "
                 f"event_index {conn.int_type} NOT NULL, reason TEXT NOT NULL, PRIMARY KEY (name, namespace))")


def has_table(conn: ProjectionDb) -> bool:
    """Whether the stops table exists. Every read asks, so on SQLite the answer is kept until the
    file's schema changes (``PRAGMA schema_version``, a few microseconds, where listing the tables costs
    a third of a read); PostgreSQL lists the schema's tables."""
    raw = getattr(conn, "raw", None)
    if not isinstance(raw, sqlite3.Connection):
        return STOPPED in conn.names()
    version = int(raw.execute("PRAGMA schema_version").fetchone()[0])
    known = _KNOWN.get(conn)
    if known is None or known[0] != version:
        known = _KNOWN[conn] = (version, STOPPED in conn.names())
    return known[1]


def stops(conn: ProjectionDb, name: str) -> dict[str, Stop]:
    """The stops of projection ``name`` by namespace (reads only: nothing is created)."""
    if not has_table(conn):
        return {}
    rows = conn.execute(f"SELECT namespace, event_index, reason FROM {STOPPED} WHERE name=?", (name,)).fetchall()
    return {ns: Stop(name, ns, int(index), reason) for ns, index, reason in rows}


def save(conn: ProjectionDb, stop: Stop) -> None:
    conn.execute(conn.upsert(STOPPED, ("name", "namespace", "event_index", "reason"), ("name", "namespace")),
                 (stop.projection, stop.namespace, stop.index, stop.reason))


def remove(conn: ProjectionDb, name: str, namespace: str | None = None) -> None:
    """Forget the stops of projection ``name`` (in one namespace, or all)."""
    if not has_table(conn):
        return
    if namespace is None:
        conn.execute(f"DELETE FROM {STOPPED} WHERE name=?", (name,))
    else:
        conn.execute(f"DELETE FROM {STOPPED} WHERE name=? AND namespace=?", (name, namespace))


def blocking(found: Mapping[str, Stop], namespace: str, as_of: int | None) -> Stop | None:
    """The stop that keeps a read of ``namespace`` as of ``as_of`` (None: now) from being answered:
    reads before the stopped event still are."""
    for ns in (namespace, EVERY_NAMESPACE):
        stop = found.get(ns)
        if stop is not None and (as_of is None or as_of >= stop.index):
            return stop
    return None


# -- field types -------------------------------------------------------------------
def _check_fields(cls: type, fields: Mapping[str, Any]) -> None:
    for name, allowed in _field_types(cls).items():
        if name not in fields:
            raise ValueError(f"field {name!r} is missing")
        value = fields[name]
        if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
            raise ValueError(f"field {name!r} is {type(value).__name__}, expected "
                             f"{' or '.join(t.__name__ for t in allowed)}")
    if not fields["namespace"] or not fields["key"]:
        raise ValueError("empty namespace or key")


@cache
def _field_types(cls: type) -> dict[str, tuple[type, ...]]:
    """The plain types each stored field of event class ``cls`` may hold (from its annotations)."""
    out: dict[str, tuple[type, ...]] = {}
    for name, hint in typing.get_type_hints(cls).items():
        if name.startswith("originator") or name == "timestamp" or typing.get_origin(hint) is typing.ClassVar:
            continue
        parts = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        if all(isinstance(p, type) for p in parts):
            out[name] = tuple(type(None) if p is type(None) else p for p in parts)
    return out


def reason_of(e: BaseException) -> str:
    """One line: the exception's type and the first line of its message."""
    text = (str(e).strip().splitlines() or [""])[0]
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


__all__ = ["EVERY_NAMESPACE", "STOPPED", "Stop", "blocking", "create_table", "reason_of", "remove", "row_namespace",
           "save", "screen", "screened", "stops", "unappliable"]
