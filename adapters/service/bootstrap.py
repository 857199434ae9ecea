"""The composition root: from a store's name and settings to the parts the use cases share.

:func:`bootstrap` chooses the backend (a SQLite file, memory, or a ``postgresql://`` URL), opens the
projection database, wires the projections to the log, and chooses the reader and the embedder. The
event log itself (and ``eventsourcing`` with it) opens only when something needs events (a write, a
catch-up, a search): :class:`LogHandle`. The embedder and the vector search are built on first use.
Nothing here decides or reads anything: that is the use cases' work (:mod:`.writes`, :mod:`.reads`,
:mod:`.searching`, :mod:`.admin`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pmem.adapters.eventstore.sealing import key_scope
from pmem.adapters.eventstore.stored_log import LazyLog, has_log
from pmem.adapters.progress import Progress, silent
from pmem.adapters.readmodels.projection_reader import ProjectionReader
from pmem.adapters.readmodels.sqlite_projection import PROJECTIONS
from pmem.adapters.readmodels.tracked_projection import NO_LIMIT, Until
from pmem.adapters.storage.backend import open_backend
from pmem.adapters.storage.meta import key_edition, read_meta
from pmem.domain.errors import InvalidOperation
from pmem.domain.keys import KEY_EDITION
from pmem.domain.operations import DEFAULT_NAMESPACE, checked_namespace, shown, string_problem
from pmem.projections.ports import VECTOR_INDEX_KINDS, Embedder
from pmem.projections.replay import ReplayReader

if TYPE_CHECKING:
    from pmem.adapters.eventstore.eventlog import EventLog
    from pmem.adapters.search.vector_search import VectorSearch

READERS = ("projection", "replay")


class LogHandle:
    """The event log of one store, opened on first use (thread-safe), closed with the store."""

    def __init__(self, path: str | Path, synchronous: str) -> None:
        self._path, self._sync = path, synchronous
        self._log: EventLog | None = None
        self._lock = threading.Lock()

    @property
    def opened(self) -> bool:
        return self._log is not None

    def get(self) -> EventLog:
        with self._lock:
            if self._log is None:
                from pmem.adapters.eventstore.eventlog import EventLog

                self._log = EventLog(self._path, synchronous=self._sync)
            return self._log

    def close(self) -> None:
        if self._log is not None:
            self._log.close()


class EmbedderSlot:
    """The injected embedder, or the chosen one (``onnx`` by default; ``hashing``; ``litellm:MODEL``)
    behind a text cache, built on first use and then owned (closed) by the store."""

    def __init__(self, embedder: Embedder | str | None, base: str | None) -> None:
        self._embedder: Embedder | None = None
        self._choice: Any = None
        self._owned: Any = None
        self._in_memory: Embedder | None = None
        self.cache_path: Callable[[], Path | None] = lambda: None  # where the text cache goes: the backend's
        if embedder is None or isinstance(embedder, str):
            from pmem.adapters.embedders.choice import EmbedderChoice  # light: no model library

            self._choice = EmbedderChoice.parse(embedder, api_base=base)
        else:
            self._embedder = embedder

    def get(self) -> Embedder:
        if self._embedder is None:
            self._embedder = self._owned = self._choice.build(self.cache_path())
        return self._embedder

    def in_memory(self) -> Embedder:
        """The same embedder with its text cache in memory, for a store whose file cannot be written
        (a search from the log there: :mod:`.log_search`); an injected embedder as it is."""
        if self._choice is None:
            assert self._embedder is not None
            return self._embedder
        if self._in_memory is None:
            self._in_memory = self._choice.build(None)
        return self._in_memory

    def close(self) -> None:
        if self._owned is not None:
            self._owned.cache.close()


@dataclass
class Wiring:
    """What one open store is made of; the use cases share it."""

    namespace: str
    vector_index: str
    progress: Progress
    backend: Any
    log: LogHandle
    projection_db: Any
    events: Any  # LazyLog on a SQLite file, else the EventLog: last_index() and raw rows
    projections: dict[str, Any]
    reader: ReplayReader | ProjectionReader
    embedders: EmbedderSlot
    key_edition: int = KEY_EDITION  # the key rule of this store (pmem.domain.keys; storage.meta)
    key_edition_since: int | None = None  # the event index it holds from, for a migrated store (service.migrate)
    lock: threading.RLock = field(default_factory=threading.RLock)  # one projection connection
    vectors: VectorSearch | None = None  # built on the first search
    until: Until = NO_LIMIT  # when a read must stop: a server's request deadline
    # around a read's wait for other work (``next`` for its scores): a server's pool lends the turn out
    waiting: Callable[[], AbstractContextManager[Any]] = nullcontext

    def vector_search(self) -> VectorSearch:
        if self.vectors is None:  # faiss and numpy load here, not when the CLI starts
            from pmem.adapters.search.vector_search import VectorSearch

            cache = self.backend.cache_path(f"vec-{self.vector_index}")
            self.vectors = VectorSearch(self.log.get(), self.embedders.get(), self.vector_index, cache, self.progress)
        return self.vectors

    def close(self) -> None:
        self.embedders.close()
        if self.vectors is not None:
            self.vectors.projection.close()
        self.projection_db.close()
        self.log.close()


def bootstrap(path: str | Path = "pmem.db", *, namespace: str = DEFAULT_NAMESPACE, synchronous: str | None = None,
              reader: str = "projection", vector_index: str | None = None, embedder: Embedder | str | None = None,
              embedder_base: str | None = None, progress: Progress = silent) -> Wiring:
    """Open the store at ``path`` and wire its parts (see the module's docstring). Every argument is
    checked before anything is opened or created."""
    path, namespace = checked_path(path), checked_namespace(namespace)
    if not isinstance(reader, str) or reader not in READERS:
        raise InvalidOperation(f"unknown reader {shown(reader)} (expected projection or replay)", field="reader")
    for name, value in (("synchronous", synchronous), ("vector_index", vector_index), ("embedder_base", embedder_base)):
        if value is not None and not isinstance(value, str):
            raise InvalidOperation(f"{name} must be a string, got {type(value).__name__}", field=name)
    sync = synchronous or os.environ.get("PMEM_SYNCHRONOUS", "FULL")  # its value is checked where the log opens
    index = vector_index or os.environ.get("PMEM_VECTOR_INDEX", "flat")
    if index not in VECTOR_INDEX_KINDS:
        raise InvalidOperation(f"unknown vector index {index!r} (expected {', '.join(VECTOR_INDEX_KINDS)})",
                               field="vector_index")
    if not (embedder is None or isinstance(embedder, str) or callable(getattr(embedder, "embed", None))):
        raise InvalidOperation(f"embedder must be an Embedder or a name (onnx, hashing, litellm:MODEL), got "
                               f"{type(embedder).__name__}", field="embedder")
    if not callable(progress):
        raise InvalidOperation(f"progress must be callable, got {type(progress).__name__}", field="progress")
    embedders = EmbedderSlot(embedder, embedder_base)  # a bad choice fails before anything is created
    log = LogHandle(path, sync)
    backend: Any = open_backend(path)  # SqliteBackend or PgBackend
    if not (backend.lazy_log and backend.log_exists()):
        backend = log.get().backend  # a new file (the EventLog creates its tables), memory or PostgreSQL
    db = None
    try:
        db = backend.connect_projections("OFF" if sync.upper() == "OFF" else "NORMAL")
        events = _events(backend, db, log)
        projections = {name: cls(db, events) for name, cls in PROJECTIONS.items()}
    except BaseException:
        if db is not None:
            db.close()
        log.close()
        raise
    embedders.cache_path = backend.embedding_cache_path
    chosen = ProjectionReader(db) if reader == "projection" else ReplayReader(log.get())
    edition = key_edition(db, events.last_index() > 0)
    since = read_meta(db, "key_edition_since")
    return Wiring(namespace, index, progress, backend, log, db, events, projections, chosen, embedders, edition,
                  None if since is None else int(since))


def checked_path(path: object) -> str | Path:
    """``path`` if it can name a store: a non-empty ``str`` or ``os.PathLike`` of ``str`` with no NUL and
    no lone surrogate (an undecodable file name), else :class:`InvalidOperation`."""
    if isinstance(path, os.PathLike):
        text = os.fspath(path)
    elif isinstance(path, str):
        text = path
    else:
        raise InvalidOperation(f"path must be a str or a pathlib.Path, got {type(path).__name__}", field="path")
    if not isinstance(text, str):
        raise InvalidOperation(f"path must be a str or a pathlib.Path, got a path of {type(text).__name__}",
                               field="path")
    if not text.strip():
        raise InvalidOperation("path is empty", field="path")
    if "\x00" in text:
        raise InvalidOperation("path contains a NUL character", field="path")
    if string_problem(text, "path", 1 << 62) is not None:
        raise InvalidOperation(f"path {shown(text)} is not valid UTF-8", field="path")
    return path if isinstance(path, (str, Path)) else text


def _events(backend: Any, db: Any, log: LogHandle) -> LazyLog | EventLog:
    """What the projections and plain reads read the log through: a SQLite file store reads its head
    and rows with plain SQL on the same file (:mod:`pmem.adapters.eventstore.stored_log`); elsewhere,
    and always for decoded events, the EventLog."""
    if not backend.lazy_log:
        return log.get()
    if not has_log(db.raw):  # a file with no P-Mem log yet: the EventLog creates it
        log.get()
    return LazyLog(db.raw, log.get, key_scope(backend)) if has_log(db.raw) else log.get()
