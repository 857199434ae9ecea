"""The graph-guided multi-hop readout over a store (``pmem read --hops N``, and issue 5's evaluations).

:func:`hop_read` runs the question-following hop policy of :mod:`pmem.projections.multihop` over the
store's entity graph as of ``as_of``: the paths it took and the facts along them. The graph is read
once per (store, namespace, event index) and kept until the store's next event (:class:`GraphCache`),
so a read at a store that has not changed since the last one looks facts up instead of rebuilding the
graph; after a write (or a forget) the next read builds it again.

:func:`graph_guided_context` (the benchmark's arm) = the single-shot read (top ``k`` cells) plus the
facts the cosine readout reaches; :func:`single_shot_context` is the baseline: the top ``k`` alone.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pmem.projections.graph import EntityGraph, Fact
from pmem.projections.multihop import (
    BEAM,
    Path,
    cosine_facts,
    fact_line,
    follow_question,
    guided_facts,
    path_facts,
    question_entities,
)


def cosine_scorer(embedder: Any) -> Any:
    """``(question, texts) -> cosines`` with ``embedder`` (unit vectors, so a dot product)."""

    def score(question: str, texts: Sequence[str]) -> list[float]:
        vecs = embedder.embed([question, *texts])
        return [float(x) for x in vecs[1:] @ vecs[0]]

    return score


@dataclass
class _Graph:
    graph: EntityGraph
    relations: frozenset[str]

    def facts_of(self, slug: str) -> list[Fact]:
        e = self.graph.entities.get(slug)
        return e.facts if e is not None else []

    def is_entity(self, slug: str) -> bool:
        e = self.graph.entities.get(slug)
        return e is not None and bool(e.facts)

    def name(self, slug: str) -> str:
        e = self.graph.entities.get(slug)
        return e.text if e is not None else slug.replace("_", " ")


@dataclass
class GraphCache:
    """The graphs read from one store since its last event, by (namespace, event index read as of).

    Any new event (a write, and so also a ``Forgotten``) drops them all: a forgotten value never
    outlives its forgetting here, even in a graph read ``as_of`` an earlier index."""

    keep: int = 2
    last: int = -1
    graphs: dict[tuple[str | None, int], _Graph] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, store: Any, namespace: str | None, as_of: int | None) -> _Graph:
        last = store.last_index()
        at = last if as_of is None else min(as_of, last)
        with self.lock:
            if last != self.last:
                self.graphs.clear()
                self.last = last
            hit = self.graphs.get((namespace, at))
        if hit is not None:
            return hit
        g = store.graph(as_of=at, namespace=namespace)
        made = _Graph(g, frozenset(f.relation for e in g.entities.values() for f in e.facts))
        with self.lock:
            if last == self.last:
                self.graphs[(namespace, at)] = made
                while len(self.graphs) > self.keep:
                    del self.graphs[next(iter(self.graphs))]
        return made


_CACHES: weakref.WeakKeyDictionary[Any, GraphCache] = weakref.WeakKeyDictionary()
_CACHES_LOCK = threading.Lock()


def graph_cache(store: Any) -> GraphCache:
    """The store's graph cache (one per store object, gone with it)."""
    with _CACHES_LOCK:
        cache = _CACHES.get(store)
        if cache is None:
            cache = _CACHES[store] = GraphCache()
        return cache


@dataclass(frozen=True)
class HopRead:
    """What the hop policy found: the paths (best first, as ``a -> relation -> b`` text) and the facts
    to read, path facts first, then the cosine readout's where no path reached every slot."""

    paths: tuple[str, ...]
    facts: tuple[Fact, ...]


def hop_read(store: Any, question: str, embedder: Any, *, hops: int = 3, as_of: int | None = None,
             namespace: str | None = None, beam: int = BEAM, per_hop: int = 6) -> HopRead:
    """Follow the question's relations from the entities it names (see the module docstring)."""
    g = graph_cache(store).get(store, namespace, as_of)
    seeds = question_entities(question, g.is_entity)
    if not seeds:
        return HopRead((), ())
    scorer = cosine_scorer(embedder)
    paths: list[Path] = follow_question(question, seeds, g.facts_of, scorer, hops=hops, beam=beam,
                                        relations=g.relations)
    facts = path_facts(paths)
    if not paths or not paths[0].complete:
        facts += cosine_facts(question, seeds, g.facts_of, scorer, hops=hops, per_hop=per_hop)
    return HopRead(tuple(p.text(g.name) for p in paths if p.hops), tuple({f.key: f for f in facts}.values()))


def single_shot_context(store: Any, question: str, k: int = 12, *, as_of: int | None = None) -> list[str]:
    """The top ``k`` cells for the question, as ``key = value`` lines."""
    return [f"{r.cell.key} = {r.cell.value}" for r in store.search(question, k, as_of=as_of)]


def graph_guided_context(store: Any, question: str, embedder: Any, k: int = 12, *, hops: int = 3,
                         per_hop: int = 6, as_of: int | None = None) -> list[str]:
    """The single-shot context plus up to ``hops * per_hop`` facts found by following value -> subject
    links from the entities the question names, nearest the whole question first."""
    base = single_shot_context(store, question, k, as_of=as_of)
    g = store.graph(as_of=as_of)
    extra = guided_facts(g, question, cosine_scorer(embedder), hops=hops, per_hop=per_hop)
    return list(dict.fromkeys([*base, *(fact_line(f) for f in extra)]))
