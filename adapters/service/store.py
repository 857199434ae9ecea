"""The public Python API: open a store, apply typed operations, read with ``as_of``.

    >>> import pmem
    >>> with pmem.open("mem.db") as store:
    ...     store.accept("5K PB", "27:12", source="coach")
    ...     store.accept("5K PB", "25:50", source="race results")
    ...     store.get("5K PB").value                 # '25:50'
    ...     store.history("5K PB").versions[0].status  # 'superseded'

Every write returns a :class:`~pmem.domain.views.Receipt`; every read accepts ``as_of`` (an event index).

:class:`Store` only composes: :func:`.bootstrap.bootstrap` wires the parts, and each method hands its
call to a use case (:class:`.writes.Writes`, :class:`.reads.Reads`, :class:`.searching.Searches`,
:class:`.admin.Admin`, :class:`.forgetting.Forgetting`). Its methods are grouped by role into five small
interfaces, which it joins.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, NoReturn, cast

from pmem.adapters.progress import Progress, silent
from pmem.adapters.readmodels.registry import PROJECTION_NAMES, VECTORS
from pmem.adapters.readmodels.tracked_projection import bounded
from pmem.adapters.service.admin import Admin
from pmem.adapters.service.bootstrap import Wiring, bootstrap
from pmem.adapters.service.doctor import SAMPLE_CELLS, Doctor
from pmem.adapters.service.forgetting import Forgetting
from pmem.adapters.service.reads import Reads, checked_flag
from pmem.adapters.service.searching import DEFAULT_K, SCORE_WAIT_S, Searches
from pmem.adapters.service.writes import Writes
from pmem.domain.errors import InvalidOperation, StoreClosed
from pmem.domain.operations import (
    DEFAULT_NAMESPACE,
    DEFAULT_TRUST,
    Evidence,
    Operation,
    checked_count,
    checked_namespace,
)
from pmem.domain.views import CellView, History, Receipt
from pmem.projections.graph import EntityGraph, Fact, entity_slug, without_system
from pmem.projections.ports import Embedder
from pmem.projections.reading import ReadResult

if TYPE_CHECKING:
    from pmem.adapters.eventstore.eventlog import EventLog
    from pmem.adapters.search.vector_search import VectorSearch
    from pmem.projections.vectors import SearchResult

__all__ = ["DEFAULT_TRUST", "PROJECTION_NAMES", "VECTORS", "Evidence", "Operation", "Store", "open_store"]


class _Parts:
    _w: Wiring
    _writes: Writes
    _forgetting: Forgetting
    _reads: Reads
    _searches: Searches
    _admin: Admin


class WriteApi(_Parts):
    """The typed operations; each returns its receipt."""

    def apply(self, operations: Iterable[Operation | Mapping[str, Any]]) -> list[Receipt]:
        """Validate every operation, then record them all atomically. A bad one raises
        :class:`~pmem.domain.errors.InvalidBatch` naming its (1-based) position, and nothing is written."""
        return self._writes.apply(operations)

    def apply_stream(self, chunks: Iterable[Sequence[Operation]], sink: Callable[[list[Receipt]], None]) -> int:
        """Record a batch given in chunks of parsed operations as ONE atomic batch in memory bounded by a
        chunk (``pmem apply`` streams its input this way). Each chunk's receipts go to ``sink`` as it is
        recorded, before the commit: keep them until this returns. An exception raised by ``chunks``
        (a bad line) rolls everything back. Returns the number of operations."""
        return self._writes.apply_stream(chunks, sink)

    def accept(self, key: str, value: str, **evidence: Any) -> Receipt:
        """Commit ``value`` as the current value (the old head is superseded, not lost)."""
        return self._writes.one("accept", key, value, **evidence)

    def contest(self, key: str, value: str, **evidence: Any) -> Receipt:
        """Hold ``value`` open as an alternative to the head."""
        return self._writes.one("contest", key, value, **evidence)

    def reject(self, key: str, value: str | None = None, **evidence: Any) -> Receipt:
        """Record the head as wrong: replace it with ``value``, or roll it back when no value is given."""
        return self._writes.one("reject", key, value, **evidence)

    def revoke(self, key: str, value: str | None = None, **evidence: Any) -> Receipt:
        """Retract the head (roll back) or an open alternative."""
        return self._writes.one("revoke", key, value, **evidence)

    def resolve(self, key: str, value: str, **evidence: Any) -> Receipt:
        """Settle a contested cell in favour of ``value``."""
        return self._writes.one("resolve", key, value, **evidence)

    def support(self, key: str, value: str | None = None, **evidence: Any) -> Receipt:
        """Add evidence to the head (or to an open alternative)."""
        return self._writes.one("support", key, value, **evidence)

    def revise(self, key: str, new_value: str, *, old_value: str | None = None, status: str = "update",
               hard_commit: bool = False, **evidence: Any) -> Receipt:
        """The revise patch (an update or a correction), classified against the head."""
        return self._writes.one("revise", key, new_value, old_value=old_value, status=status,
                                hard_commit=hard_commit or None, **evidence)

    def declare_prerequisite(self, before: str, after: str, **evidence: Any) -> Receipt:
        """Record that ``after`` (a key or entity) may be asked or used only once ``before`` is known."""
        return self._writes.declare_prerequisite(before, after, **evidence)


class ForgetApi(_Parts):
    """The right to erasure (docs/forgetting.md)."""

    def forget(self, key: str | None = None, *, subject: str | None = None,
               namespace: str | None = None) -> list[Receipt]:
        """Forget the cell ``key``, or with ``subject`` every cell of that subject (the key ``subject``
        and every ``subject.*``): a ``Forgotten`` event is appended to each and its data key destroyed,
        so its values, evidence texts, sources and reasons read ``<forgotten>`` everywhere, at every
        ``as_of``; every projection and cache drops them. ``get`` then reads the cell as empty; a later
        write starts it afresh under a new key. One receipt (op ``forget``) per cell forgotten; a cell
        with nothing new since its last forget, or never written, gets none."""
        return self._forgetting.forget(key, subject=subject, namespace=namespace)


class ReadApi(_Parts):
    """What the memory holds, now or as of an event index."""

    def get(self, key: str, *, as_of: int | None = None, disclose: Iterable[str] = (),
            namespace: str | None = None) -> CellView:
        """The cell now (or as of event index ``as_of``); an unknown cell reads as ``empty``."""
        return self._reads.get(key, as_of=as_of, disclose=disclose, namespace=namespace)

    def get_many(self, keys: Iterable[str], *, namespace: str | None = None) -> dict[str, CellView]:
        """The current view of each key (normalised key -> view, empty cells included), in one read."""
        return self._reads.get_many(keys, namespace=namespace)

    def frontier(self, *, as_of: int | None = None, disclose: Iterable[str] = (),
                 namespace: str | None = None, system: bool = False, after: str | None = None,
                 limit: int | None = None) -> list[CellView]:
        """Every non-empty cell of the namespace, by key; P-Mem's own cells (keys starting with ``_``, such
        as the soft-identity aliases ``_alias.*``) only with ``system``. One page: ``after`` (the cells
        whose key sorts after it: the last key of the page before) and ``limit`` (at most that many); a
        page is read from the store a page at a time, so it costs what its cells cost, not the namespace."""
        return self._reads.frontier(as_of=as_of, disclose=disclose, namespace=namespace, system=system,
                                    after=after, limit=limit)

    def history(self, key: str, *, as_of: int | None = None, namespace: str | None = None) -> History:
        """Every version the cell has held or been offered, with status and open intervals."""
        return self._reads.history(key, as_of=as_of, namespace=namespace)

    def log(self, *, after: int = 0, limit: int | None = None, namespace: str | None = None,
            as_of: int | None = None) -> list[dict[str, Any]]:
        """Events after index ``after`` (at most ``limit``), as plain dicts."""
        return self._reads.log(after=after, limit=limit, namespace=namespace, as_of=as_of)

    def last_index(self) -> int:
        """The index of the newest event in the whole log (0 when empty)."""
        return self._reads.last_index()


class SearchApi(_Parts):
    """Retrieval: vector search, the context an agent reads, the entity graph."""

    def search(self, query: str, k: int = DEFAULT_K, *, as_of: int | None = None,
               namespace: str | None = None, system: bool = False, ranking: str = "hybrid") -> list[SearchResult]:
        """The ``k`` cells whose open versions (head or alternatives, as of ``as_of``) best match
        ``query``, best first, each read as of that index: the cosine over ``key: value`` and full-text
        search over keys, values and evidence fused by rank, cells whose subject the query names first
        (docs/search.md); ``ranking="vector"``: by the cosine alone. System cells (``_alias.*``) only
        with ``system=True``."""
        return self._searches.search(query, k, as_of=as_of, namespace=namespace, system=system, ranking=ranking)

    def read(self, question: str, *, mode: str = "cells", k: int = DEFAULT_K, budget: int | None = None,
             disclose: Iterable[str] = (), as_of: int | None = None,
             namespace: str | None = None, system: bool = False, alternatives: str = "summary",
             min_trust: int | None = None, hops: int = 0, iterative: bool = False,
             dated: bool = False) -> ReadResult:
        """The context string an agent receives for ``question`` (cells or turns), with its size in
        characters and tokens; see :mod:`pmem.adapters.service.reader`. P-Mem's own cells only with ``system``.
        Alternatives below the head's trust are counted, not listed, unless ``alternatives="all"``; versions
        (and turns) below ``min_trust`` are left out. ``hops``: also the facts along the question's relations
        followed from the entities it names, at least ``hops`` links, one per relation named (offline);
        ``iterative``: up to 3 follow-up lookups an LLM plans (``PMEM_LLM_BASE``); either way ``paths`` says
        what was followed. ``dated``: each cell after the day its current value was observed,
        ``[25 May 2023] key = value`` (turns always are)."""
        from pmem.adapters.service.reader import WithSystemCells

        memory = WithSystemCells(self) if checked_flag(system, "system") else self
        return self._searches.read(memory, question, mode=mode, k=k, budget=budget, disclose=disclose,
                                   as_of=as_of, namespace=namespace, alternatives=alternatives,
                                   min_trust=min_trust, hops=hops, iterative=iterative, dated=dated)

    def graph(self, *, as_of: int | None = None, namespace: str | None = None, embed: bool = False,
              threshold: float | None = None, system: bool = False) -> EntityGraph:
        """The entity graph (typed entities, prerequisite and association edges) as of ``as_of``.

        ``embed``: also give every entity the embedding of its text (the store's embedder) and add
        association edges between entities whose embeddings have cosine >= ``threshold`` (default
        0.8); without it, association edges come from shared entities only (no model is loaded).
        ``system``: keep P-Mem's own cells (``_alias.*``) and what they link; left out by default."""
        system = checked_flag(system, "system")
        g = self._searches.graph(as_of=as_of, namespace=namespace, embed=embed, threshold=threshold)
        return g if system else without_system(g)

    def what_next(self, k: int = 5, *, previous: str | None = None, as_of: int | None = None,
                  namespace: str | None = None, system: bool = False,
                  wait: float | None = SCORE_WAIT_S) -> list[dict[str, Any]]:
        """The ``k`` best next questions (``pmem next``), each with the event index its scores hold for
        (``as_of``). Now: read from the graph projection's stored scores by a top-k query; scores a write
        made stale are waited for at most ``wait`` seconds (None: until current), then answer as they are,
        with their older ``as_of``. At an earlier ``as_of``, or with ``system``, ranked from scratch over
        that graph (docs/graph.md)."""
        from pmem.adapters.graph.view import proposals

        k = checked_count(k, "k", "a positive number of proposals", minimum=1)
        pick = None if previous is None else entity_slug(previous)
        last = self._reads.last_index()
        now = as_of is None or (type(as_of) is int and as_of >= last)  # a bad as_of: graph() says why
        if now and not checked_flag(system, "system"):
            return self._searches.what_next(k, pick, namespace=namespace, wait=wait)
        g = self.graph(as_of=as_of, namespace=namespace, system=system)
        at = last if as_of is None else min(as_of, last)
        return [{**p, "as_of": at} for p in proposals(g, k, pick)]

    def graph_facts(self, subjects: Iterable[str], *, as_of: int | None = None,
                    namespace: str | None = None) -> dict[str, list[Fact]]:
        """The open facts of each entity slug (keys ``<slug>.<relation>``) as of ``as_of``: what
        ``graph(as_of=...).entities[slug].facts`` holds, read by key without building the graph."""
        return self._searches.facts_of(subjects, as_of=as_of, namespace=namespace)

    def graph_around(self, entities: Iterable[str], *, as_of: int | None = None,
                     namespace: str | None = None) -> EntityGraph:
        """The part of the entity graph at ``entities`` (slugs) as of ``as_of``: their facts and every edge
        at them (no embedding associations, no P-Mem cells), read from those entities' rows only, so it
        costs what the neighbourhood holds, not the store. Other entities in it are partial."""
        return self._searches.graph_around(entities, as_of=as_of, namespace=namespace)

    @property
    def embedder(self) -> Embedder:
        """What search embeds with: the injected embedder, else the chosen one (``onnx``, the offline
        model, by default; ``hashing``; ``litellm:MODEL``) behind a text cache, built on first use."""
        return self._w.embedders.get()

    def vector_search(self) -> VectorSearch:
        """The vector projection (tables, FAISS cache, embedder) this store searches with."""
        return self._w.vector_search()


class AdminApi(_Parts):
    """Projection upkeep: catch up, rebuild from the log, counts and lag."""

    def catch_up(self) -> dict[str, int]:
        """Apply every new event to every projection; return the events each applied."""
        return self._admin.catch_up()

    def rebuild(self, projection: str = "all") -> dict[str, Any]:
        """Drop and replay ``projection`` (or all) from index 1: ``{"events", "seconds"}``, ``events``
        being the log events replayed (each projection replays the same ones, so they are not summed).
        ``vectors`` also deletes and rewrites the FAISS file; texts already in the embedding cache
        are not run through the model again."""
        return self._admin.rebuild(projection)

    def rebuild_vectors(self) -> int:
        """Drop the vector tables and cache file and rebuild them from the log; return its last index."""
        return self._admin.rebuild_vectors()

    def stats(self) -> dict[str, Any]:
        """Counts over the whole store (every namespace), without catching anything up: ``cells``
        and ``versions`` are what the frontier projection holds, ``lag`` how far each projection is
        behind. A projection that a ``pmem worker`` has followed also shows that ``worker``: pid,
        host, state, whether it is alive, and the age of its last heartbeat."""
        return self._admin.stats()

    def migrate_keys(self, spellings: Iterable[str] = (), *, dry_run: bool = False) -> list[dict[str, Any]]:
        """Move a store of key edition 1 to edition 2, re-keying as events the cells that ``spellings``
        (raw keys) name; with ``dry_run``, only say what it would do (see :mod:`pmem.adapters.service.migrate`)."""
        from pmem.adapters.service.migrate import migrate_keys, read_spellings

        if isinstance(spellings, (str, bytes)) or not isinstance(spellings, Iterable):
            raise InvalidOperation("spellings must be a list of raw keys", field="spellings")
        if not isinstance(dry_run, bool):
            raise InvalidOperation(f"dry_run must be true or false, got {type(dry_run).__name__}", field="dry_run")
        raws = read_spellings(s if isinstance(s, str) else _not_a_key(s) for s in spellings)
        out = list(migrate_keys(self._w, self._reads, self._writes, raws, dry_run))
        self.key_edition = self._w.key_edition
        return out

    def doctor(self, sample: int = SAMPLE_CELLS) -> list[dict[str, Any]]:
        """Check the store without writing anything: ``{"check", "ok", "detail", "fix"}`` for the SQLite
        integrity check, ``sample`` cells of the frontier projection against a replay of the log, shadow
        tables, dead workers, leftover rebuild processes, lag and the key edition; ``fix`` names the
        command that repairs a failed check (see :mod:`pmem.adapters.service.doctor`)."""
        return Doctor(self._w).run(sample)


def _not_a_key(s: object) -> NoReturn:
    raise InvalidOperation(f"spellings must be strings, got {type(s).__name__}", field="spellings")


class Store(WriteApi, ForgetApi, ReadApi, SearchApi, AdminApi):
    """A P-Mem store on one SQLite file (or ``":memory:"``) or a PostgreSQL database (a
    ``postgresql://`` URL), scoped to a default namespace.

    Reads are served by the frontier projection (``reader="projection"``, the default), caught up
    before each read as far as the namespace read needs; ``reader="replay"`` folds the log instead (the
    reference the projection is tested against). On an existing file the event log itself (and
    ``eventsourcing`` with it) opens only when something needs events.
    """

    def __init__(self, path: str | Path = "pmem.db", *, namespace: str = DEFAULT_NAMESPACE,
                 synchronous: str | None = None, reader: str = "projection", vector_index: str | None = None,
                 embedder: Embedder | str | None = None, embedder_base: str | None = None,
                 progress: Progress = silent) -> None:
        self._w = w = bootstrap(path, namespace=namespace, synchronous=synchronous, reader=reader,
                                vector_index=vector_index, embedder=embedder, embedder_base=embedder_base,
                                progress=progress)
        w.progress = bounded(w.progress, lambda: w.until)  # a catch-up stops between batches past a deadline
        self._writes, self._reads, self._admin = Writes(w), Reads(w), Admin(w)
        self._forgetting = Forgetting(w)
        self._searches = Searches(w, self._reads)
        self.vector_index, self.progress = w.vector_index, w.progress
        self.backend, self.projection_db, self.projections = w.backend, w.projection_db, w.projections
        self.frontier_projection = w.projections["frontier"]
        self.reader, self._events = w.reader, w.events
        self.key_edition = w.key_edition  # the key rule this store keeps (pmem.domain.keys)

    @property
    def namespace(self) -> str:
        """The namespace reads and writes use when they name none; it may be changed on an open store."""
        return str(self._w.namespace)

    @namespace.setter
    def namespace(self, namespace: str) -> None:
        self._w.namespace = checked_namespace(namespace)

    @property
    def log_store(self) -> EventLog:
        """The event log (``eventsourcing``), opened on first use."""
        return self._w.log.get()

    def close(self) -> None:
        """Close the store (a second close does nothing). Every use after it raises
        :class:`~pmem.domain.errors.StoreClosed`."""
        if isinstance(self._w, _Closed):
            return
        try:
            self._searches.close()
            self._w.close()
        finally:
            closed = cast(Any, _Closed())
            self._w, self._writes, self._reads, self._searches, self._admin = (closed,) * 5
            self._forgetting = closed

    def __enter__(self) -> Store:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


class _Closed:
    """What the parts of a closed store become: any use of them raises :class:`StoreClosed`."""

    def __getattr__(self, name: str) -> NoReturn:
        raise StoreClosed("store is closed")


SETTINGS = ("vector_index", "embedder", "embedder_base", "progress")


def open_store(path: str | Path = "pmem.db", *, namespace: str = DEFAULT_NAMESPACE,
               synchronous: str | None = None, reader: str = "projection", **settings: Any) -> Store:
    """Open (creating if needed) the store at ``path``. ``settings``: ``vector_index``, ``embedder`` (an
    ``Embedder``, or ``"onnx"``, ``"hashing"``, ``"litellm:MODEL"``; default ``$PMEM_EMBEDDER`` or onnx),
    ``embedder_base`` (the litellm server URL; default ``$PMEM_EMBED_BASE``), ``progress``."""
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        raise InvalidOperation(f"unknown setting {unknown[0]!r} (expected {', '.join(SETTINGS)})", field=unknown[0])
    return Store(path, namespace=namespace, synchronous=synchronous, reader=reader, **settings)
