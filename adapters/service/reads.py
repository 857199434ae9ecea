"""The read use case: cells, histories, the frontier and the raw log, now or as of an event index.

Reads are served by the frontier projection, caught up first as far as the namespace read needs (other
namespaces' events are left to whoever reads them: ``TrackedProjection.catch_up_for``), or by a fold of
the log itself with ``reader="replay"``, the reference the projection is tested against."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any
from uuid import UUID

from pmem.adapters.eventstore.codec import decode_event
from pmem.adapters.eventstore.stored_log import event_dict
from pmem.adapters.readmodels import screening
from pmem.adapters.readmodels.projection_reader import ProjectionReader
from pmem.adapters.readmodels.screening import reason_of
from pmem.adapters.service.bootstrap import Wiring
from pmem.domain.errors import InvalidOperation, StoreUnavailable
from pmem.domain.extraction.key_identity import is_system_key
from pmem.domain.keys import cell_id, normalize_key
from pmem.domain.operations import (
    MAX_FIELD_CHARS,
    MAX_INDEX,
    checked_count,
    checked_namespace,
    checked_string,
    disclosures,
    optional_count,
)
from pmem.domain.views import CellView, History
from pmem.projections.frontier_view import ProjectedCell
from pmem.projections.replay import IndexedEvent, ReplayReader, Timeline, empty_view, fold

LOG_PAGE = 5_000  # rows per read of ``log``
PAGE_KEYS = 5_000  # keys a paged frontier read looks at per round


class Reads:
    """What the memory holds, from the projections (caught up first) or a fold of the log."""

    def __init__(self, wiring: Wiring) -> None:
        self.w = wiring

    def get(self, key: str, *, as_of: int | None = None, disclose: Iterable[str] = (),
            namespace: str | None = None) -> CellView:
        ns, as_of = self.namespace(namespace), checked_as_of(as_of)
        k, modes = self.key(key, as_of), disclosures(disclose)
        t = self.timeline(cell_id(ns, k), as_of, ns)
        return empty_view(ns, k) if t is None else t.view(modes)

    def get_many(self, keys: Iterable[str], *, namespace: str | None = None) -> dict[str, CellView]:
        ns = self.namespace(namespace)
        if isinstance(keys, (str, bytes, bytearray)) or not isinstance(keys, Iterable):
            raise InvalidOperation(f"keys must be a list of keys, got {type(keys).__name__}", field="keys")
        wanted = {self.key(k) for k in keys}
        ids = {cell_id(ns, k): k for k in wanted}
        found = fold(e for events in self.w.log.get().cell_events(list(ids)).values() for e in events)
        return {k: found[cid].view() if cid in found else empty_view(ns, k) for cid, k in ids.items()}

    def frontier(self, *, as_of: int | None = None, disclose: Iterable[str] = (),
                 namespace: str | None = None, system: bool = False, after: str | None = None,
                 limit: int | None = None) -> list[CellView]:
        ns, as_of, modes = self.namespace(namespace), checked_as_of(as_of), disclosures(disclose)
        system = checked_flag(system, "system")
        if after is not None and not isinstance(after, str):
            raise InvalidOperation(f"after must be a key, got {type(after).__name__}", field="after")
        limit = optional_count(limit, "limit", "a positive number of cells", minimum=1)
        if limit is not None or after is not None:
            return self._frontier_page(ns, as_of, modes, system, after or "", limit)
        with self.w.lock:
            reader = self.caught_up_reader(ns, as_of)
            cells: Sequence[Timeline | ProjectedCell] = reader.frontier(ns, as_of, with_versions=bool(modes))
        views = (t.view(modes) for t in cells)
        return list(views) if system else [v for v in views if not is_system_key(v.key)]

    def _frontier_page(self, ns: str, as_of: int | None, modes: Any, system: bool, after: str,
                       limit: int | None) -> list[CellView]:
        """The first ``limit`` (None: every) non-empty cells after the key ``after``, read a page of keys at
        a time, so the first page of a large namespace costs one page."""
        out: list[CellView] = []
        keys = PAGE_KEYS if limit is None else min(max(2 * limit, 64), PAGE_KEYS)  # a few empty or system cells
        while limit is None or len(out) < limit:
            with self.w.lock:
                reader = self.caught_up_reader(ns, as_of)
                cells, last = reader.frontier_page(ns, as_of, after=after, limit=keys, with_versions=bool(modes))
            views = (t.view(modes) for t in cells)
            out += views if system else (v for v in views if not is_system_key(v.key))
            if last is None:
                break
            after = last
        return out if limit is None else out[:limit]

    def history(self, key: str, *, as_of: int | None = None, namespace: str | None = None) -> History:
        ns, as_of = self.namespace(namespace), checked_as_of(as_of)
        k = self.key(key, as_of)
        t = self.timeline(cell_id(ns, k), as_of, ns)
        return History(ns, k, ()) if t is None else t.history()

    def log(self, *, after: int = 0, limit: int | None = None, namespace: str | None = None,
            as_of: int | None = None) -> list[dict[str, Any]]:
        ns, as_of = self.namespace(namespace), checked_as_of(as_of)
        after = checked_count(after, "after", "a non-negative event index")
        limit = optional_count(limit, "limit", "a non-negative number of events")
        out: list[dict[str, Any]] = []
        if limit == 0 or after >= MAX_INDEX:
            return out
        start = after + 1
        # A page as big as the limit, doubling while other namespaces' events fill it: each page's
        # keys are read again, so reading a whole page for a few events costs more than the events.
        page = LOG_PAGE if limit is None else min(LOG_PAGE, limit)
        while True:
            rows = self.w.events.rows(start, as_of, page)
            self.w.events.keys.refresh(r[1] for r in rows)
            for row in rows:
                d = logged(row, self.w.events.keys)
                if d["namespace"] == ns or d["namespace"] is None:
                    out.append(d)
                    if limit is not None and len(out) >= limit:
                        return out
            if len(rows) < page:
                return out
            start, page = rows[-1][0] + 1, min(LOG_PAGE, page * 2)

    def last_index(self) -> int:
        return int(self.w.events.last_index())

    def key(self, key: object, as_of: int | None = None) -> str:
        """The cell key a read names, by the store's key edition; as of an event before a key migration
        switched the edition (``key_edition_since``), by edition 1, the rule the store had then."""
        since = self.w.key_edition_since
        edition = 1 if since is not None and as_of is not None and as_of < since else self.w.key_edition
        return normalize_key(checked_key(key), edition)

    def namespace(self, namespace: object) -> str:
        """The namespace a read names: the store's when None, else a valid namespace (never ``""``)."""
        return self.w.namespace if namespace is None else checked_namespace(namespace)

    def timeline(self, cid: UUID, as_of: int | None, namespace: str) -> Timeline | ProjectedCell | None:
        """One cell (of ``namespace``)'s timeline as of ``as_of`` (None when it has no events by then).
        While another request, or a server's catch-up thread, folds events this read needs into the
        frontier projection, the cell is folded from the log instead (the reference the projection is
        tested against, equal by definition): a point read never waits behind a fold of other
        tenants' writes (docs/server.md, "Reads and the projections")."""
        with self.w.lock:
            return self.caught_up_reader(namespace, as_of, point=True).timeline(cid, as_of)

    def timelines(self, cids: list[UUID], as_of: int, namespace: str) -> list[Timeline | ProjectedCell | None]:
        """Several cells' timelines (of ``namespace``) as of ``as_of``, after one catch-up and, from the
        projection, in one snapshot (a search's results)."""
        with self.w.lock:
            reader = self.caught_up_reader(namespace, as_of)
            if isinstance(reader, ProjectionReader):
                return list(reader.timelines(cids, as_of))
            return [reader.timeline(cid, as_of) for cid in cids]

    def caught_up_reader(self, namespace: str, as_of: int | None, *,
                         point: bool = False) -> ReplayReader | ProjectionReader:
        """The reader for a read of ``namespace`` as of ``as_of``: the frontier projection once caught up.
        Raises :class:`~pmem.domain.errors.ProjectionStopped` when it stopped in that namespace by then
        (:mod:`pmem.adapters.readmodels.screening`). When it lags and cannot be caught up because the
        store cannot be written (read-only), the log answers instead: a fold of it, as ``reader="replay"``.
        ``point``: a read of one cell, which a fold that would wait for another thread leaves to the
        event log (a fold of that cell's events alone, by its index)."""
        if not isinstance(self.w.reader, ProjectionReader):
            return self.w.reader
        frontier = self.w.projections["frontier"]
        try:
            if frontier.catch_up_for(namespace, as_of, self.w.until, self.w.progress, wait=not point) is None:
                frontier.check_readable(namespace, as_of)
                return ReplayReader(self.w.log.get())
        except StoreUnavailable:
            if not self.lags(frontier) or not self.w.until.left():
                raise  # a real failure, or the deadline: not a store that cannot be written
            return ReplayReader(LogRows(self.w.events))
        frontier.check_readable(namespace, as_of)
        return self.w.reader

    def log_rows(self, namespace: str, as_of: int | None) -> LogRows | None:
        """The log's rows when reads of ``namespace`` as of ``as_of`` must come from the log (the frontier
        projection lags and cannot be caught up: the store cannot be written), else None."""
        with self.w.lock:
            try:
                reader = self.caught_up_reader(namespace, as_of)
            except StoreUnavailable:
                return None
        source = reader.source if isinstance(reader, ReplayReader) else None
        return source if isinstance(source, LogRows) else None

    def search_log(self, namespace: str, as_of: int | None) -> LogRows | None:
        """The log's rows when a search that could not catch its projections up must come from the log:
        the frontier reads from the log there (:meth:`log_rows`), or it is caught up but the search
        projections (the lexical one stands for both: a search catches both up) lag. Else None."""
        log = self.log_rows(namespace, as_of)
        if log is not None:
            return log
        try:
            behind = self.lags(self.w.projections["lexical"])
        except StoreUnavailable:
            return None
        return LogRows(self.w.events) if behind else None

    def lags(self, projection: Any) -> bool:
        """Whether ``projection`` is behind the log (reading both, writing nothing)."""
        return bool(projection.position() < self.w.events.last_index())


def logged(row: Any, keys: Any = None) -> dict[str, Any]:
    """What ``log`` shows for a stored row: the event, or, for a row that cannot be read (written by a
    newer release, or damaged), its index, namespace (None when unreadable: then every namespace's log
    shows it) and why, so that one bad row neither hides the rest of the log nor fails it. Sealed
    fields are opened with ``keys``."""
    try:
        return event_dict(row, keys)
    except Exception as e:  # noqa: BLE001  (whatever it is, this row cannot be read: say why)
        return {"event_index": row[0], "namespace": screening.row_namespace(row[4]), "undecodable": reason_of(e)}


class LogRows:
    """The log read through its raw rows and the one codec, without the event log (``eventsourcing``),
    which a store that cannot be written cannot open: what the fold needs when the projections lag
    there. Slower than the projections: a cell's events are found by reading the log up to ``upto``."""

    def __init__(self, events: Any) -> None:
        self.events = events  # LazyLog or EventLog: rows(start, stop, limit) and the keyring, keys

    def indexed_events(self, start: int = 1, stop: int | None = None) -> Iterator[IndexedEvent]:
        while True:
            rows = self.events.rows(start, stop, LOG_PAGE)
            self.events.keys.refresh(r[1] for r in rows)
            for index, cid, revision, topic, state in rows:
                yield index, decode_event(topic, state, cid, revision, self.events.keys)
            if len(rows) < LOG_PAGE:
                return
            start = rows[-1][0] + 1

    def cell_events(self, ids: Sequence[UUID], upto: int | None = None) -> dict[UUID, list[IndexedEvent]]:
        wanted = {cid.hex for cid in ids}
        out: dict[UUID, list[IndexedEvent]] = {}
        start = 1
        while True:
            rows = self.events.rows(start, upto, LOG_PAGE)
            self.events.keys.refresh(r[1] for r in rows if r[1] in wanted)
            for index, cid, revision, topic, state in rows:
                hexid = cid.hex if isinstance(cid, UUID) else UUID(str(cid)).hex
                if hexid in wanted:
                    event = decode_event(topic, state, hexid, revision, self.events.keys)
                    out.setdefault(UUID(hexid), []).append((index, event))
            if len(rows) < LOG_PAGE:
                return out
            start = rows[-1][0] + 1


def checked_key(key: object) -> str:
    """``key`` if it is a string a key can be read by (1 to 1,024 bytes of UTF-8), else :class:`InvalidOperation`."""
    return checked_string(key, "key", MAX_FIELD_CHARS, blank=True)


def checked_flag(flag: object, name: str) -> bool:
    """``flag`` if it is true or false (``system``: list P-Mem's own cells too), else :class:`InvalidOperation`."""
    if not isinstance(flag, bool):
        raise InvalidOperation(f"{name} must be true or false, got {type(flag).__name__}", field=name)
    return flag


def checked_as_of(as_of: object) -> int | None:
    """``as_of`` if it is None or an event index (an integer from 0 to 2**63-1), else :class:`InvalidOperation`."""
    return optional_count(as_of, "as_of", "a non-negative event index")


