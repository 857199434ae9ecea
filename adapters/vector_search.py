"""Search (SPEC §6): rank the cells open at an event index by the cosine of ``key: value``.

Composes the positioned tables (:mod:`adapters.vector_projection`), an embedder and the FAISS cache
(:mod:`adapters.faiss_index`). Every search first catches the tables up with the log, then the
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

from adapters.eventlog import EventLog
from adapters.faiss_index import FaissIndex, Header, Ids, Vectors
from adapters.progress import Progress, silent
from adapters.vector_projection import Eligible, VectorProjection
from projections.ports import Embedder

EMBED_BATCH = 1024
SAVE_STALE = 0.05  # the cache file is rewritten once it lacks more than 5% of the vectors
MIN_FETCH = 64  # vectors fetched in the first round, at least; grows 4x while too few cells are found


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
        self._last_eligible: tuple[tuple[str, int], EligibleSet] | None = None
        self.index: FaissIndex | None = None
        self._saved = -1  # vectors in the cache file as this object last wrote or read it (-1: unknown)

    def catch_up(self, target: int | None = None) -> int:
        """Bring tables and index up to ``target`` (default: the end of the log); return the event
        index they reflect."""
        position = self.projection.catch_up(self.progress, target)
        self._sync(position)
        return position

    def search(self, query: str, k: int, as_of: int | None, namespace: str) -> tuple[int, list[Hit]]:
        """The top ``k`` cells of ``namespace`` as of ``as_of`` (default: now), best first, and the
        event index that was searched (``as_of`` capped at the end of the log)."""
        position = self.catch_up()
        n = position if as_of is None else min(as_of, position)
        eligible = self._eligible(namespace, n)
        if not eligible.by_id or k <= 0:
            return n, []
        assert self.index is not None
        query_vector = self.embedder.embed([query])[0]
        return n, top_cells(self.index, query_vector, eligible, k)

    def _eligible(self, namespace: str, n: int) -> EligibleSet:
        """The versions open at ``n``, kept in memory for the last (namespace, index) asked: what was
        open at an index the tables have reached never changes (the log only grows), so repeated
        searches of the current head read no interval rows."""
        if self._last_eligible is None or self._last_eligible[0] != (namespace, n):
            self._last_eligible = (namespace, n), EligibleSet(self.projection.eligible(namespace, n))
        return self._last_eligible[1]

    def rebuild(self) -> int:
        """Forget tables and cache, replay the log from index 1; return the position reached."""
        self.projection.reset()
        self.index, self._saved = None, -1
        if self.cache_path is not None:
            self.cache_path.unlink(missing_ok=True)
        return self.catch_up()

    # -- the cache -----------------------------------------------------------
    def _sync(self, position: int) -> None:
        total = self.projection.count()
        index = self.index if self.index is not None else self._load(total, position)
        if index.count > total:  # the tables were rebuilt behind our back: start over
            index, self._saved = FaissIndex(self.kind, self.embedder.dim), -1
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


class EligibleSet:
    """Versions open at one event index, prepared for FAISS: sorted ids, their cells, and the id
    selector (built once, on the first search that needs one)."""

    def __init__(self, eligible: list[Eligible]) -> None:
        self.by_id = {e.vector_id: e for e in eligible}
        self.ids: Ids = np.fromiter(self.by_id, dtype=np.int64, count=len(self.by_id))
        self.ids.sort()
        self._selector: object | None = None

    def selector(self) -> object:
        if self._selector is None:
            import faiss

            self._selector = faiss.IDSelectorBatch(self.ids)  # holds a copy: ``ids`` may be freed
        return self._selector


def top_cells(index: FaissIndex, query: Vectors, eligible: EligibleSet, k: int) -> list[Hit]:
    """The ``k`` best cells among the eligible vectors, each scored by its best vector.

    Fetches the best ``m`` eligible vectors from the index; if they span at least ``k`` cells, those
    are the top ``k`` (no cell outside them can beat a cell inside). Otherwise fetches 4x more, and
    when even all eligible vectors were asked for, scores every eligible vector exactly. With
    ``flat`` the result is exact; ``hnsw`` and ``lsh`` may miss a vector the index did not find.
    """
    by_id, ids = eligible.by_id, eligible.ids
    m = min(len(ids), max(4 * k, MIN_FETCH))
    while True:
        found = index.candidates(query, ids, m, eligible.selector)
        hits = best_per_cell(index, query, found, by_id)
        if len(hits) >= k or (m >= len(ids) and len(found) == len(ids)):
            return hits[:k]
        if m >= len(ids):
            return best_per_cell(index, query, ids, by_id)[:k]  # the index found too few: exact fallback
        m = min(len(ids), 4 * m)


def best_per_cell(index: FaissIndex, query: Vectors, ids: Ids, by_id: dict[int, Eligible]) -> list[Hit]:
    """Score ``ids`` exactly and keep each cell's best, ordered by score then vector id."""
    scores = index.scores(query, ids)
    hits: list[Hit] = []
    seen: set[str] = set()
    for i in np.lexsort((ids, -scores)):
        e = by_id[int(ids[i])]
        if e.cell not in seen:
            seen.add(e.cell)
            hits.append(Hit(e.cell, e.key, e.vid, e.vector_id, float(scores[i])))
    return hits
