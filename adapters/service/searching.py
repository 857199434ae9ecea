"""The search use cases: the cells that best match a text, the context an agent reads, the entity graph."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any
from uuid import UUID

from pmem.adapters.service.bootstrap import Wiring
from pmem.adapters.service.reads import Reads, checked_as_of, checked_flag
from pmem.domain.errors import InvalidOperation, StoreUnavailable
from pmem.domain.operations import checked_count, disclosures, optional_count, shown, string_problem
from pmem.projections.graph import EntityGraph, Fact
from pmem.projections.reading import ReadResult

if TYPE_CHECKING:
    from pmem.adapters.graph.scorer import ScoreWorker
    from pmem.projections.vectors import SearchResult

DEFAULT_K = 12  # retrieval returns the top L = 12 cells
RANKINGS = ("hybrid", "vector")  # search: both channels fused, or the vector channel alone
SCORE_WAIT_S = 2.0  # how long ``next`` waits for stale graph scores by default: well inside a server's deadline


class ScorerSlot:
    """Where the :class:`~pmem.adapters.graph.scorer.ScoreWorker` of one or more stores is kept: a server's
    stores share one, so a process scores each namespace once, not once per pooled store. ``place``: the
    graph projection and lock it works with (None: those of the store that first asks); ``apart``: whether
    it scores in a child process (a server's: :mod:`pmem.adapters.graph.score_process`)."""

    def __init__(self, place: Callable[[], tuple[Any, Any]] | None = None, *, apart: bool = False) -> None:
        self.lock = threading.Lock()
        self.worker: ScoreWorker | None = None
        self.place = place
        self.apart = apart


class Searches:
    """Hybrid search over open versions, context reading, and the graph projection."""

    def __init__(self, wiring: Wiring, reads: Reads) -> None:
        self.w = wiring
        self.reads = reads
        self._scorer: ScoreWorker | None = None  # the worker this store started, if any
        self.scoring = ScorerSlot()  # the worker ``next`` uses: this store's, or one a server's stores share

    def search(self, query: str, k: int = DEFAULT_K, *, as_of: int | None = None,
               namespace: str | None = None, system: bool = False, ranking: str = "hybrid") -> list[SearchResult]:
        """Hybrid search (:mod:`pmem.adapters.search.hybrid`): the vector and lexical channels fused; with
        ``ranking="vector"`` the vector channel alone (exact cosine scores). On a store that cannot be
        written whose projections lag, the vector channel alone over a fold of the log (:mod:`.log_search`)."""
        query, k = checked_text(query, "query"), checked_k(k)
        ns, as_of = self.reads.namespace(namespace), checked_as_of(as_of)
        if not isinstance(system, bool):
            raise InvalidOperation(f"system must be true or false, got {type(system).__name__}", field="system")
        if not isinstance(ranking, str) or ranking not in RANKINGS:
            raise InvalidOperation(f"unknown ranking {shown(ranking)} (expected hybrid or vector)", field="ranking")
        from pmem.adapters.search.hybrid import HybridSearch
        from pmem.projections.vectors import SearchResult

        with self.w.lock:  # the lexical projection reads and writes on the shared projection connection
            try:
                vectors, lexical = self.w.vector_search(), self.w.projections["lexical"]
                n, hits = HybridSearch(vectors, lexical).search(query, k, as_of, ns, system=system,
                                                                lexical=ranking == "hybrid")
            except StoreUnavailable:
                log = self.reads.search_log(ns, as_of)
                if log is None:  # the search projections do not lag: a real failure
                    raise
                from pmem.adapters.service.log_search import log_search  # numpy and the fold: only here

                last = self.reads.last_index()
                n = last if as_of is None else min(as_of, last)
                return log_search(log, self.w.embedders, query, k, n, ns, system=system)
            for projection in (vectors.projection, lexical):
                projection.check_readable(ns, as_of)
        self.w.until.check("the search's cells were not read")  # between its stages: ranked, then read
        out = []
        for h, t in zip(hits, self.reads.timelines([UUID(h.cell) for h in hits], n, ns), strict=True):
            assert t is not None  # an open version implies the cell has events up to n
            matched = next(v.value for v in t.history().versions if v.vid == h.vid)
            out.append(SearchResult(t.view(), h.score, matched))
        return out

    def read(self, memory: Any, question: str, *, mode: str, k: int, budget: int | None,
             disclose: Iterable[str], as_of: int | None, namespace: str | None,
             alternatives: str = "summary", min_trust: int | None = None, hops: int = 0,
             iterative: bool = False, dated: bool = False) -> ReadResult:
        """The context for ``question``, read through ``memory`` (the store: see :mod:`.reader`)."""
        from pmem.adapters.service.reader import MODES, Reader
        from pmem.projections.reading import ALTERNATIVES

        question, k = checked_text(question, "question"), checked_k(k)
        if not isinstance(mode, str) or mode not in MODES:
            raise InvalidOperation(f"unknown read mode {shown(mode)} (expected cells or turns)", field="mode")
        if not isinstance(alternatives, str) or alternatives not in ALTERNATIVES:
            raise InvalidOperation(f"unknown alternatives {shown(alternatives)} (expected summary or all)",
                                   field="alternatives")
        budget = optional_count(budget, "budget", "a positive number of tokens", minimum=1)
        min_trust = optional_count(min_trust, "min_trust", "a trust from 0 to 100")
        if min_trust is not None and min_trust > 100:
            raise InvalidOperation(f"min_trust must be a trust from 0 to 100, got {min_trust}", field="min_trust")
        hops, planner = multihop_options(mode, hops, iterative)
        as_of, ns = checked_as_of(as_of), self.reads.namespace(namespace)
        return Reader(memory, planner=planner).read(
            question, mode=mode, k=k, budget=budget, disclose=disclosures(disclose), as_of=as_of, namespace=ns,
            alternatives=alternatives, min_trust=min_trust, hops=hops, dated=checked_flag(dated, "dated"))

    def facts_of(self, subjects: Iterable[str], *, as_of: int | None = None,
                 namespace: str | None = None) -> dict[str, list[Fact]]:
        """The open facts of each subject slug as of ``as_of`` (the graph's, without building it)."""
        ns, as_of = self.reads.namespace(namespace), checked_as_of(as_of)
        with self.w.lock:
            projection = self.w.projections["graph"]
            projection.catch_up_for(ns, as_of, self.w.until, self.w.progress)
            projection.check_readable(ns, as_of)
            return {s: projection.facts_of(ns, s, as_of) for s in dict.fromkeys(subjects)}

    def graph(self, *, as_of: int | None = None, namespace: str | None = None, embed: bool = False,
              threshold: float | None = None) -> EntityGraph:
        ns, as_of = self.reads.namespace(namespace), checked_as_of(as_of)
        if not isinstance(embed, bool):
            raise InvalidOperation(f"embed must be true or false, got {type(embed).__name__}", field="embed")
        if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))
                                      or not -1.0 <= threshold <= 1.0):
            raise InvalidOperation(f"threshold must be a cosine from -1 to 1, got {shown(threshold)}",
                                   field="threshold")
        with self.w.lock:
            projection = self.w.projections["graph"]
            projection.catch_up_for(ns, as_of, self.w.until, self.w.progress)
            projection.check_readable(ns, as_of)
            g: EntityGraph = projection.graph(ns, as_of)
        if embed:
            from pmem.adapters.graph.view import ASSOCIATION_THRESHOLD, cosine_associations

            cosine_associations(g, self.w.embedders.get(), ASSOCIATION_THRESHOLD if threshold is None else threshold)
        return g


    def what_next(self, k: int, previous: str | None, *, namespace: str | None = None,
                  wait: float | None = SCORE_WAIT_S) -> list[dict[str, Any]]:
        """The ``k`` best next questions, read from the graph projection's stored scores, each with the event
        index those hold for (``as_of``). Scores made stale by a write are brought up to date by the store's
        :class:`~pmem.adapters.graph.scorer.ScoreWorker`, waited for at most ``wait`` seconds (None: until
        current); past that the stored ones answer, with their older ``as_of`` (docs/graph.md)."""
        from pmem.adapters.graph.scores import ranked

        ns = self.reads.namespace(namespace)
        projection = self.w.projections["graph"]
        with self.w.lock:
            # only this namespace's events are folded: current scores then hold at ``last`` too
            last = self.reads.last_index()
            projection.catch_up_for(ns, None, self.w.until, self.w.progress)
            projection.check_readable(ns, None)
            current = projection.scored(ns)[2]
        if not current:
            with self.w.waiting():  # waiting for the worker uses no CPU: others may have the turn meanwhile
                self.scorer().wait(lambda: bool(projection.scored(ns)[2]), wait)
        with self.w.lock:
            position, top, current = projection.scored(ns)
            rows = projection.next_rows(ns, k, previous)
            return ranked(rows, k, top, projection.community_of(ns, previous), max(position, last) if current
                          else position)

    def scorer(self) -> ScoreWorker:
        """The worker of :attr:`scoring`, started on this store by the first request thread that asks."""
        from pmem.adapters.graph.scorer import ScoreWorker

        with self.scoring.lock:
            if self.scoring.worker is None and self.scoring.place is not None:
                self.scoring.worker = ScoreWorker(*self.scoring.place(), apart=self.scoring.apart)
            elif self.scoring.worker is None:
                self._scorer = self.scoring.worker = ScoreWorker(self.w.projections["graph"], self.w.lock,
                                                                 apart=self.scoring.apart)
            return self.scoring.worker

    def close(self) -> None:
        """Stop the score worker this store started; once no round holds the store's lock, none will take
        it again (a store that shares the slot starts another when next asked)."""
        if self._scorer is not None:
            with self.scoring.lock:
                if self.scoring.worker is self._scorer:
                    self.scoring.worker = None
            self._scorer.close()
            with self.w.lock:
                pass

    def graph_around(self, entities: Iterable[str], *, as_of: int | None = None,
                     namespace: str | None = None) -> EntityGraph:
        """The part of the entity graph at ``entities`` (the graph projection's ``graph_around``)."""
        ns, as_of = self.reads.namespace(namespace), checked_as_of(as_of)
        with self.w.lock:
            projection = self.w.projections["graph"]
            projection.catch_up_for(ns, as_of, self.w.until, self.w.progress)
            projection.check_readable(ns, as_of)
            g: EntityGraph = projection.graph_around(ns, set(entities), as_of)
        return g


def multihop_options(mode: str, hops: object, iterative: object) -> tuple[int, Any]:
    """``(hops, planner)`` of a read: ``hops`` from 0 to :data:`~.reader.MAX_HOPS`, and the LLM lookup
    planner when ``iterative`` (configured by ``PMEM_LLM_BASE``); both read cells only."""
    from pmem.adapters.service.reader import MAX_HOPS

    hops = checked_count(hops, "hops", f"a number of hops from 0 to {MAX_HOPS}", minimum=0)
    if hops > MAX_HOPS:
        raise InvalidOperation(f"hops must be a number of hops from 0 to {MAX_HOPS}, got {hops}", field="hops")
    if not isinstance(iterative, bool):
        raise InvalidOperation(f"iterative must be true or false, got {shown(iterative)}", field="iterative")
    if (hops or iterative) and mode != "cells":
        raise InvalidOperation("hops and iterative read cells: they do not combine with mode turns", field="mode")
    if not iterative:
        return hops, None
    from pmem.adapters.llm.reader import LLMReader

    return hops, LLMReader.from_env()


def checked_text(text: object, name: str) -> str:
    """``text`` if it is a string with something besides whitespace and no lone surrogate (a query or a
    question), else :class:`InvalidOperation`."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidOperation(f"{name} must be a non-empty string", field=name)
    problem = string_problem(text, name, 1 << 62)
    if problem is not None:
        raise InvalidOperation(problem, field=name)
    return text


def checked_k(k: object) -> int:
    """``k`` if it is a positive integer (at most 2**63-1), else :class:`InvalidOperation`."""
    return checked_count(k, "k", "a positive integer", minimum=1)
