"""The public Python API: open a store, apply typed operations, read with ``as_of``.

    >>> import pmem
    >>> with pmem.open("mem.db") as store:
    ...     store.accept("5K PB", "27:12", source="coach")
    ...     store.accept("5K PB", "25:50", source="race results")
    ...     store.get("5K PB").value                 # '25:50'
    ...     store.history("5K PB").versions[0].status  # 'superseded'

Every write returns a :class:`~domain.views.Receipt`; every read accepts ``as_of`` (an event index).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any
from uuid import UUID

from pmem.adapters.eventstore.stored_log import LazyLog, event_dict, has_log
from pmem.adapters.progress import Progress, silent
from pmem.adapters.readmodels.projection_reader import ProjectionReader
from pmem.adapters.readmodels.sqlite_projection import PROJECTIONS, FrontierProjection, timed
from pmem.adapters.storage.backend import open_backend
from pmem.domain.errors import InvalidBatch, InvalidOperation
from pmem.domain.keys import cell_id, normalize_key
from pmem.domain.operations import DEFAULT_NAMESPACE, DEFAULT_TRUST, Evidence, Operation, parse_operation
from pmem.domain.views import CellView, History, Receipt
from pmem.projections.frontier_view import ProjectedCell
from pmem.projections.graph import EntityGraph, prerequisite_key
from pmem.projections.ports import VECTOR_INDEX_KINDS, Embedder
from pmem.projections.reading import ReadResult
from pmem.projections.replay import ReplayReader, Timeline, empty_view, fold

if TYPE_CHECKING:
    from pmem.adapters.eventstore.eventlog import EventLog
    from pmem.adapters.search.vector_search import VectorSearch
    from pmem.projections.vectors import SearchResult

LOG_PAGE = 5_000  # rows per read of ``Store.log``
DISCLOSURES = frozenset({"history", "alternatives", "support"})
READERS = ("projection", "replay")
DEFAULT_K = 12  # SPEC §6: retrieval returns the top L = 12 cells
VECTORS = "vectors"  # the vector projection's name for rebuild and stats
PROJECTION_NAMES = (*sorted(PROJECTIONS), VECTORS)  # what `rebuild --projection` accepts, besides all


class Store:
    """A P-Mem store on one SQLite file (or ``":memory:"``) or a PostgreSQL database (a
    ``postgresql://`` URL, see :mod:`pmem.adapters.storage.backend`), scoped to a default namespace.

    Reads are served by the frontier projection (``reader="projection"``, the default), caught up
    to the end of the log before each read; ``reader="replay"`` folds the log instead (the
    reference the projection is tested against). On an existing file the event log itself (and
    ``eventsourcing`` with it) opens only when something needs events: a write, a catch-up of new
    events, a search (see :mod:`pmem.adapters.eventstore.stored_log`).
    """

    def __init__(self, path: str | Path = "pmem.db", *, namespace: str = DEFAULT_NAMESPACE,
                 synchronous: str | None = None, reader: str = "projection",
                 vector_index: str | None = None, embedder: Embedder | str | None = None,
                 embedder_base: str | None = None, progress: Progress = silent) -> None:
        if reader not in READERS:
            raise InvalidOperation(f"unknown reader {reader!r} (expected projection or replay)",
                                   field="reader")
        sync = synchronous or os.environ.get("PMEM_SYNCHRONOUS", "FULL")
        self.namespace = namespace
        self.vector_index = vector_index or os.environ.get("PMEM_VECTOR_INDEX", "flat")
        if self.vector_index not in VECTOR_INDEX_KINDS:
            raise InvalidOperation(f"unknown vector index {self.vector_index!r} (expected "
                                   f"{', '.join(VECTOR_INDEX_KINDS)})", field="vector_index")
        self._embedder: Embedder | None = None
        self._embedder_choice: Any = None  # an EmbedderChoice, built on first use
        if embedder is None or isinstance(embedder, str):
            from pmem.adapters.embedders.choice import EmbedderChoice  # light: no model library

            self._embedder_choice = EmbedderChoice.parse(embedder, api_base=embedder_base)
        else:
            self._embedder = embedder
        self.progress = progress  # told about long catch-ups and rebuilds (pmem.adapters.progress)
        self._owned_embedder: Any = None  # the default embedder this store built, closed with it
        self._vectors: VectorSearch | None = None  # built on the first search
        self._path = path
        self._sync = sync
        self._log: EventLog | None = None
        self._log_lock = threading.Lock()
        self.backend = open_backend(path)  # pmem.adapters.storage.backend: SQLite or PostgreSQL, chosen from `path`
        if not (self.backend.lazy_log and self.backend.log_exists()):
            self._open_log()  # a new file (the EventLog creates its tables), memory or PostgreSQL
            self.backend = self.log_store.backend  # the same choice; a memory store's own database name
        try:
            self.projection_db = self.backend.connect_projections("OFF" if sync.upper() == "OFF" else "NORMAL")
            # A SQLite file store reads the log's head and rows with plain SQL on the same file
            # (pmem.adapters.eventstore.stored_log); elsewhere the projections go through the EventLog.
            self._events: LazyLog | EventLog = self._log_reader()
            self.projections = {name: cls(self.projection_db, self._events)
                                for name, cls in PROJECTIONS.items()}
        except BaseException:
            if hasattr(self, "projection_db"):
                self.projection_db.close()
            if self._log is not None:
                self._log.close()
            raise
        self.frontier_projection: FrontierProjection = self.projections["frontier"]
        self._lock = threading.RLock()  # one projection connection: one catch-up or read at a time
        self.reader: ReplayReader | ProjectionReader = (
            ProjectionReader(self.projection_db) if reader == "projection"
            else ReplayReader(self.log_store))

    # -- lifecycle -----------------------------------------------------------
    @property
    def log_store(self) -> EventLog:
        """The event log (``eventsourcing``), opened on first use."""
        return self._log or self._open_log()

    def _log_reader(self) -> LazyLog | EventLog:
        """What the projections and plain reads read the log through: a SQLite file store reads its
        head and rows with plain SQL on the same file (:mod:`pmem.adapters.eventstore.stored_log`); elsewhere, and
        always for decoded events, the EventLog."""
        if not self.backend.lazy_log:
            return self.log_store
        if not has_log(self.projection_db.raw):  # a file with no P-Mem log yet: the EventLog creates it
            self._open_log()
        return LazyLog(self.projection_db.raw, self._open_log) if has_log(self.projection_db.raw) else self.log_store

    def _open_log(self) -> EventLog:
        with self._log_lock:
            if self._log is None:
                from pmem.adapters.eventstore.eventlog import EventLog

                self._log = EventLog(self._path, synchronous=self._sync)
            return self._log

    def close(self) -> None:
        if self._owned_embedder is not None:
            self._owned_embedder.cache.close()
        if self._vectors is not None:
            self._vectors.projection.close()
        self.projection_db.close()
        if self._log is not None:
            self._log.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    # -- writing -------------------------------------------------------------
    def apply(self, operations: Iterable[Operation | Mapping[str, Any]]) -> list[Receipt]:
        """Validate every operation, then record them all atomically. A bad one raises
        :class:`InvalidBatch` naming its (1-based) position, and nothing is written."""
        ops: list[Operation] = []
        for n, item in enumerate(operations, 1):
            if isinstance(item, Operation):
                ops.append(item)
                continue
            try:
                ops.append(parse_operation(item, self.namespace))
            except InvalidOperation as e:
                raise InvalidBatch(str(e), line=n, field=e.field) from None
        return self.log_store.execute(ops)

    def _one(self, op: str, key: str, value: str | None, **fields: Any) -> Receipt:
        d: dict[str, Any] = {"op": op, "key": key, **{k: v for k, v in fields.items() if v is not None}}
        if value is not None:
            d["new_value" if op == "revise" else "value"] = value
        return self.log_store.execute([parse_operation(d, self.namespace)])[0]

    def accept(self, key: str, value: str, **evidence: Any) -> Receipt:
        """Commit ``value`` as the current value (the old head is superseded, not lost)."""
        return self._one("accept", key, value, **evidence)

    def contest(self, key: str, value: str, **evidence: Any) -> Receipt:
        """Hold ``value`` open as an alternative to the head."""
        return self._one("contest", key, value, **evidence)

    def reject(self, key: str, value: str | None = None, **evidence: Any) -> Receipt:
        """Record the head as wrong: replace it with ``value``, or roll it back when no value is given."""
        return self._one("reject", key, value, **evidence)

    def revoke(self, key: str, value: str | None = None, **evidence: Any) -> Receipt:
        """Retract the head (roll back) or an open alternative."""
        return self._one("revoke", key, value, **evidence)

    def resolve(self, key: str, value: str, **evidence: Any) -> Receipt:
        """Settle a contested cell in favour of ``value``."""
        return self._one("resolve", key, value, **evidence)

    def support(self, key: str, value: str | None = None, **evidence: Any) -> Receipt:
        """Add evidence to the head (or to an open alternative)."""
        return self._one("support", key, value, **evidence)

    def revise(self, key: str, new_value: str, *, old_value: str | None = None, status: str = "update",
               hard_commit: bool = False, **evidence: Any) -> Receipt:
        """The patch interface of SPEC §5, classified against the head."""
        return self._one("revise", key, new_value, old_value=old_value, status=status,
                         hard_commit=hard_commit or None, **evidence)

    # -- reading -------------------------------------------------------------
    def get(self, key: str, *, as_of: int | None = None, disclose: Iterable[str] = (),
            namespace: str | None = None) -> CellView:
        """The cell now (or as of event index ``as_of``); an unknown cell reads as ``empty``."""
        ns, k = namespace or self.namespace, normalize_key(key)
        modes = _disclosures(disclose)
        t = self._timeline(cell_id(ns, k), as_of)
        return empty_view(ns, k) if t is None else t.view(modes)

    def get_many(self, keys: Iterable[str], *, namespace: str | None = None) -> dict[str, CellView]:
        """The current view of each key (normalised key -> view, empty cells included), in one read."""
        ns = namespace or self.namespace
        wanted = {normalize_key(k) for k in keys}
        ids = {cell_id(ns, k): k for k in wanted}
        found = fold(e for events in self.log_store.cell_events(list(ids)).values() for e in events)
        return {k: found[cid].view() if cid in found else empty_view(ns, k) for cid, k in ids.items()}

    def frontier(self, *, as_of: int | None = None, disclose: Iterable[str] = (),
                 namespace: str | None = None) -> list[CellView]:
        """Every non-empty cell of the namespace, by key."""
        modes = _disclosures(disclose)
        with self._lock:
            self._catch_up()
            cells = self.reader.frontier(namespace or self.namespace, as_of, with_versions=bool(modes))
        return [t.view(modes) for t in cells]

    def history(self, key: str, *, as_of: int | None = None, namespace: str | None = None) -> History:
        """Every version the cell has held or been offered, with status and open intervals."""
        ns, k = namespace or self.namespace, normalize_key(key)
        t = self._timeline(cell_id(ns, k), as_of)
        return History(ns, k, ()) if t is None else t.history()

    def log(self, *, after: int = 0, limit: int | None = None, namespace: str | None = None,
            as_of: int | None = None) -> list[dict[str, Any]]:
        """Events after index ``after`` (at most ``limit``), as plain dicts."""
        ns = namespace or self.namespace
        out: list[dict[str, Any]] = []
        start = after + 1
        while True:
            rows = self._log_rows(start, as_of, LOG_PAGE)
            for row in rows:
                d = event_dict(row)
                if d["namespace"] == ns:
                    out.append(d)
                    if limit is not None and len(out) >= limit:
                        return out
            if len(rows) < LOG_PAGE:
                return out
            start = rows[-1][0] + 1

    def _log_rows(self, start: int, stop: int | None, limit: int) -> list[Any]:
        return self._events.rows(start, stop, limit)

    def last_index(self) -> int:
        """The index of the newest event in the whole log (0 when empty)."""
        return self._events.last_index()

    # -- search (SPEC §6) ----------------------------------------------------
    def search(self, query: str, k: int = DEFAULT_K, *, as_of: int | None = None,
               namespace: str | None = None) -> list[SearchResult]:
        """The ``k`` cells whose open versions (head or alternatives, as of ``as_of``) best match
        ``query`` by cosine over ``key: value``, best first, each read as of that index."""
        if not isinstance(query, str) or not query.strip():
            raise InvalidOperation("query must be a non-empty string", field="query")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise InvalidOperation(f"k must be a positive integer, got {k!r}", field="k")
        if as_of is not None and as_of < 0:
            raise InvalidOperation(f"as_of must be a non-negative event index, got {as_of}", field="as_of")
        from pmem.projections.vectors import SearchResult

        ns = namespace or self.namespace
        n, hits = self._vector_search().search(query, k, as_of, ns)
        out = []
        for h in hits:
            t = self._timeline(UUID(h.cell), n)
            assert t is not None  # an open version implies the cell has events up to n
            matched = next(v.value for v in t.history().versions if v.vid == h.vid)
            out.append(SearchResult(t.view(), h.score, matched))
        return out

    # -- reading (SPEC §6) ---------------------------------------------------
    def read(self, question: str, *, mode: str = "cells", k: int = DEFAULT_K, budget: int | None = None,
             disclose: Iterable[str] = (), as_of: int | None = None,
             namespace: str | None = None) -> ReadResult:
        """The context string an agent receives for ``question`` (cells or turns), with its size in
        characters and tokens; see :mod:`pmem.adapters.service.reader`."""
        from pmem.adapters.service.reader import Reader

        return Reader(self).read(question, mode=mode, k=k, budget=budget, disclose=_disclosures(disclose),
                                 as_of=as_of, namespace=namespace)

    def rebuild_vectors(self) -> int:
        """Drop the vector tables and cache file and rebuild them from the log; return its last index."""
        return self._vector_search().rebuild()

    @property
    def embedder(self) -> Embedder:
        """What search embeds with: the injected embedder, else the chosen one (``onnx``, the offline
        model, by default; ``hashing``; ``litellm:MODEL``) behind a text cache in the store file, or in
        the local cache folder of a PostgreSQL store (built on first use; a model loads, or a server is
        asked, on the first text)."""
        if self._embedder is None:
            self._embedder = self._owned_embedder = self._embedder_choice.build(
                self.backend.embedding_cache_path())
        return self._embedder

    def vector_search(self) -> VectorSearch:
        """The vector projection (tables, FAISS cache, embedder) this store searches with."""
        return self._vector_search()

    def _vector_search(self) -> VectorSearch:
        if self._vectors is None:  # faiss and numpy load here, not when the CLI starts
            from pmem.adapters.search.vector_search import VectorSearch

            cache = self.backend.cache_path(f"vec-{self.vector_index}")
            self._vectors = VectorSearch(self.log_store, self.embedder, self.vector_index, cache, self.progress)
        return self._vectors

    # -- graph (SPEC §8) -----------------------------------------------------
    def graph(self, *, as_of: int | None = None, namespace: str | None = None, embed: bool = False,
              threshold: float | None = None) -> EntityGraph:
        """The entity graph (typed entities, prerequisite and association edges) as of ``as_of``.

        ``embed``: also give every entity the embedding of its text (the store's embedder) and add
        association edges between entities whose embeddings have cosine >= ``threshold`` (default
        0.8); without it, association edges come from shared entities only (no model is loaded)."""
        with self._lock:
            projection = self.projections["graph"]
            projection.catch_up()
            g: EntityGraph = projection.graph(namespace or self.namespace, as_of)
        if embed:
            from pmem.adapters.graph.view import ASSOCIATION_THRESHOLD, cosine_associations

            cosine_associations(g, self.embedder, ASSOCIATION_THRESHOLD if threshold is None else threshold)
        return g

    def declare_prerequisite(self, before: str, after: str, **evidence: Any) -> Receipt:
        """Record that ``after`` (a key or entity) may be asked or used only once ``before`` is known."""
        for name, v in (("before", before), ("after", after)):
            if not isinstance(v, str) or not normalize_key(v):
                raise InvalidOperation(f"{name} must be a non-empty key, got {v!r}", field=name)
        return self._one("accept", prerequisite_key(before, after), json.dumps([before, after]), **evidence)

    # -- projections ---------------------------------------------------------
    def _timeline(self, cid: UUID, as_of: int | None) -> Timeline | ProjectedCell | None:
        with self._lock:
            self._catch_up()
            return self.reader.timeline(cid, as_of)

    def _catch_up(self) -> None:
        if isinstance(self.reader, ProjectionReader):
            self.frontier_projection.catch_up(progress=self.progress)

    def catch_up(self) -> dict[str, int]:
        """Apply every new event to every projection; return the events each applied."""
        with self._lock:
            return {name: p.catch_up(progress=self.progress) for name, p in self.projections.items()}

    def rebuild(self, projection: str = "all") -> dict[str, Any]:
        """Drop and replay ``projection`` (or all) from index 1: ``{"events", "seconds"}``, ``events``
        being the log events replayed (each projection replays the same ones, so they are not summed).
        ``vectors`` also deletes and rewrites the FAISS file; texts already in the embedding cache
        are not run through the model again."""
        if projection != "all" and projection not in PROJECTION_NAMES:
            raise InvalidOperation(f"unknown projection {projection!r} (expected "
                                   f"{', '.join(PROJECTION_NAMES)} or all)", field="projection")
        names = PROJECTION_NAMES if projection == "all" else (projection,)
        with self._lock:
            events, seconds = timed(lambda: max(self._rebuild_one(n) for n in names))
        return {"events": events, "seconds": seconds}

    def _rebuild_one(self, name: str) -> int:
        return self.rebuild_vectors() if name == VECTORS else self.projections[name].rebuild(progress=self.progress)

    def stats(self) -> dict[str, Any]:
        """Counts over the whole store (every namespace), without catching anything up: ``cells``
        and ``versions`` are what the frontier projection holds, ``lag`` how far it is behind. A
        projection that a ``pmem worker`` has followed also shows that ``worker``: pid, host, state,
        whether it is alive, and the age of its last heartbeat (:mod:`pmem.adapters.readmodels.heartbeat`)."""
        from pmem.adapters.readmodels.heartbeat import workers

        last = self._events.last_index()
        conn = self.projection_db
        with self._lock:
            projections = {**{name: p.stats(last) for name, p in sorted(self.projections.items())},
                           VECTORS: _position_and_lag(_vector_position(conn), last)}
            for name, worker in workers(conn).items():
                if name in projections:
                    projections[name]["worker"] = worker
            return {
                "events": last,
                "cells": conn.execute("SELECT count(*) FROM cells").fetchone()[0],
                "versions": conn.execute("SELECT count(*) FROM versions").fetchone()[0],
                "projections": projections,
            }


def _position_and_lag(position: int, last: int) -> dict[str, Any]:
    return {"position": position, "lag": max(last - position, 0)}


def _vector_position(conn: Any) -> int:
    """``pmem.adapters.readmodels.vector_projection.stored_position`` without importing that module (it imports
    eventsourcing, which ``pmem stats`` does not need); a test checks the two agree."""
    if "pmem_vec_position" not in conn.names():
        return 0
    row = conn.execute("SELECT position FROM pmem_vec_position WHERE name=?", (VECTORS,)).fetchone()
    return 0 if row is None else int(row[0])


def _disclosures(disclose: Iterable[str]) -> frozenset[str]:
    modes = frozenset(m.strip() for m in disclose if m.strip())
    bad = sorted(modes - DISCLOSURES)
    if bad:
        raise InvalidOperation(f"unknown disclosure {bad[0]!r} (expected history, alternatives or support)",
                               field="disclose")
    return modes


def open_store(path: str | Path = "pmem.db", *, namespace: str = DEFAULT_NAMESPACE,
               synchronous: str | None = None, reader: str = "projection", **settings: Any) -> Store:
    """Open (creating if needed) the store at ``path``. ``settings``: ``vector_index``, ``embedder`` (an
    ``Embedder``, or ``"onnx"``, ``"hashing"``, ``"litellm:MODEL"``; default ``$PMEM_EMBEDDER`` or onnx),
    ``embedder_base`` (the litellm server URL; default ``$PMEM_EMBED_BASE``), ``progress``."""
    return Store(path, namespace=namespace, synchronous=synchronous, reader=reader, **settings)


__all__ = ["DEFAULT_TRUST", "Evidence", "Operation", "Store", "open_store"]
