"""Search (docs/reading.md): rank the cells open at an event index by the cosine of ``key: value``.

Composes the positioned tables (:mod:`pmem.adapters.readmodels.vector_projection`), an embedder and the FAISS cache
(:mod:`pmem.adapters.search.faiss_index`). Every search first catches the tables up with the log, then the
cache up with the tables (embedding only the versions it lacks), and saves the cache when it grew
or is missing. The cache is disposable: delete it and the next search rebuilds it from the tables
(and :meth:`VectorSearch.rebuild` rebuilds the tables from the log), with identical results.

A cell's score is that of its best version among those open at the event index: the head and
every open alternative count, so a contested claim is findable by either value.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pmem.adapters.eventstore.eventlog import EventLog
from pmem.adapters.progress import Progress, silent
from pmem.adapters.readmodels.vector_projection import Eligible, VectorProjection
from pmem.adapters.search.eligible import EligibleSet
from pmem.adapters.search.faiss_index import FaissIndex, Header, Ids, Vectors
from pmem.projections.ports import Embedder

EMBED_BATCH = 1024
HEADS_KEPT = 8  # namespaces whose head set stays in memory (a mask over all vector ids each)
SAVE_STALE = 0.05  # the cache file is rewritten once it lacks more than 5% of the vectors


@dataclass(frozen=True, slots=True)
class Hit:
    """One cell found: its best open version and that version's score."""

    cell: str  # cell id, hex
    key: str
    vid: int
    vector_id: int
    score: float


class VectorSearch:
    """The vector projection of one store. ``cache_path`` None keeps the index in memory only."""

    def __init__(self, log: EventLog, embedder: Embedder, kind: str = "flat",
                 cache_path: Path | None = None, progress: Progress = silent) -> None:
        self.projection = VectorProjection(log)
        self.embedder, self.kind, self.cache_path = embedder, kind, cache_path
        self.progress = progress
        self.index: FaissIndex | None = None
        self._saved = -1  # vectors in the cache file as this object last wrote or read it (-1: unknown)
        self._position = -1  # the event index tables and index reflect, as this object last saw them
        self._heads: dict[str, tuple[int, EligibleSet]] = {}  # namespace -> (head index, open there)
        self._past: tuple[tuple[str, int], EligibleSet] | None = None  # the last as_of below the head

    def catch_up(self, target: int | None = None) -> int:
        """Bring tables and index up to ``target`` (default: the end of the log); return the event
        index they reflect. When the log has not grown since the last call (and the cache file is in
        place) that is one query: what is in memory reflects that same prefix of the log."""
        if (target is None and self.index is not None and self.projection.log.last_index() == self._position
                and (self.cache_path is None or self.cache_path.exists())):
            return self._position
        gone = self.cache_path is not None and self._saved > 0 and not self.cache_path.exists()
        if self.index is not None and gone:
            self._forget()  # deleted behind this object's back (a forget, or a rebuild, elsewhere): start over
        forgotten = self.projection.forgotten
        position = self.projection.catch_up(target, self.progress)
        if self.projection.forgotten != forgotten:
            self.drop_vectors()
        self._sync(position)
        self._position = position
        return position

    def search(self, query: str, k: int, as_of: int | None, namespace: str) -> tuple[int, list[Hit]]:
        """The top ``k`` cells of ``namespace`` as of ``as_of`` (default: now), best first, and the
        event index that was searched (``as_of`` capped at the end of the log)."""
        position = self.catch_up()
        n = position if as_of is None else min(as_of, position)
        eligible = self.eligible(namespace, n)
        if not len(eligible) or k <= 0:
            return n, []
        assert self.index is not None
        query_vector = self.embedder.embed([query])[0]
        return n, top_cells(self.index, query_vector, eligible, k)

    def eligible(self, namespace: str, n: int) -> EligibleSet:
        """The versions of ``namespace`` open at ``n`` (the tables being caught up to at least ``n``):
        at the position last caught up to, the head set; below it, the set read for ``n``."""
        return self._head(namespace, n) if n == self._position else self._eligible_at(namespace, n)

    def _head(self, namespace: str, position: int) -> EligibleSet:
        """The versions open at the head, kept per namespace and moved forward in place: only the
        versions with an interval opened or closed since the last head are read."""
        held = self._heads.pop(namespace, None)
        if held is None or held[0] > position:
            eligible = EligibleSet(self.projection.eligible(namespace, position))
        else:
            since, eligible = held
            if since < position:
                eligible.update(self.projection.changes(namespace, since, position))
        self._heads[namespace] = position, eligible  # most recently used last
        if len(self._heads) > HEADS_KEPT:
            del self._heads[next(iter(self._heads))]
        return eligible

    def _eligible_at(self, namespace: str, n: int) -> EligibleSet:
        """The versions open at ``n`` below the head, kept for the last (namespace, index) asked: what
        was open at an index the tables have reached never changes (the log only grows)."""
        if self._past is None or self._past[0] != (namespace, n):
            self._past = (namespace, n), EligibleSet(self.projection.eligible(namespace, n))
        return self._past[1]

    def rebuild(self) -> int:
        """Forget tables and cache, replay the log from index 1; return the position reached."""
        self.projection.reset()
        self._forget()
        if self.cache_path is not None:
            self.cache_path.unlink(missing_ok=True)
        return self.catch_up()

    def drop_vectors(self) -> None:
        """Forget the index in memory and delete its cache file (a cell was forgotten: its vectors must
        go); the next catch-up embeds every text again, from the embedding cache where it can."""
        self._forget()
        if self.cache_path is not None:
            self.cache_path.unlink(missing_ok=True)

    # -- the cache -----------------------------------------------------------
    def _sync(self, position: int) -> None:
        total = self.projection.count()
        index = self.index if self.index is not None else self._load(total, position)
        if index.count > total:  # the tables were rebuilt behind our back: start over
            self._forget()
            index = FaissIndex(self.kind, self.embedder.dim)
        bar = self.progress("embedding", total - index.count)
        try:
            for start in range(index.count, total, EMBED_BATCH):
                stop = min(total, start + EMBED_BATCH)
                index.add(self.embedder.embed(self.projection.texts(start, stop)))
                bar.update(stop - start)
        finally:
            bar.close()
        self.index = index
        if self.cache_path is None:
            return
        # Rewriting the whole file for every new vector would cost more than embedding the few
        # vectors a stale file lacks, so it is saved once it lacks more than SAVE_STALE of them.
        stale = index.count - self._saved
        if stale > max(0, int(self._saved * SAVE_STALE)) or not self.cache_path.exists():
            index.save(self.cache_path, Header(self.kind, self.embedder.dim, self.embedder.name, index.count,
                                               position, self._last_text(index.count)))
            self._saved = index.count

    def _forget(self) -> None:
        self.index, self._saved, self._position, self._heads, self._past = None, -1, -1, {}, None

    def _load(self, total: int, position: int) -> FaissIndex:
        """The cached index if it fits these tables and settings, else an empty one."""
        loaded = None if self.cache_path is None else FaissIndex.load(self.cache_path)
        if loaded is not None:
            index, h = loaded
            if ((h.kind, h.dim, h.embedder) == (self.kind, self.embedder.dim, self.embedder.name)
                    and h.count <= total and h.position <= position
                    and h.last_text == self._last_text(h.count)):
                self._saved = h.count
                return index
        self._saved = -1
        return FaissIndex(self.kind, self.embedder.dim)

    def _last_text(self, count: int) -> str:
        return "" if count == 0 else self.projection.texts(count - 1, count)[0]


def top_cells(index: FaissIndex, query: Vectors, eligible: EligibleSet, k: int) -> list[Hit]:
    """The ``k`` best cells among the eligible vectors, each scored by its best vector.

    Fetches the ``m`` candidates the index ranks best and scores them exactly. They give the top
    ``k`` cells when they span at least ``k`` cells and (for ``flat``) no vector left out can score
    as high as the ``k``-th cell (no cell outside them can then beat a cell inside, nor raise a cell's
    score). Otherwise fetches 4x more, up to all eligible vectors, which are scored exactly. With
    ``flat`` the result is exact; ``hnsw`` and ``lsh`` may miss a vector the index did not find.
    """
    m = index.first_fetch(k, len(eligible))
    while True:
        found = index.candidates(query, eligible, m)
        hits = best_per_cell(index, query, found.ids, eligible.by_id, k)
        if found.complete or (len(hits) >= k and (found.limit is None or hits[-1].score >= found.limit)):
            return hits
        m = min(len(eligible), 4 * m)


def best_per_cell(index: FaissIndex, query: Vectors, ids: Ids, by_id: dict[int, Eligible], k: int) -> list[Hit]:
    """Score ``ids`` exactly and keep each cell's best, ordered by score then vector id, first ``k``."""
    scores = index.scores(query, ids)
    hits: list[Hit] = []
    seen: set[str] = set()
    for i in np.lexsort((ids, -scores)):
        e = by_id[int(ids[i])]
        if e.cell not in seen:
            seen.add(e.cell)
            hits.append(Hit(e.cell, e.key, e.vid, e.vector_id, float(scores[i])))
            if len(hits) == k:
                break
    return hits
