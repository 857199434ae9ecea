"""The graph-guided multi-hop readout over a store (``pmem read --hops N``, and the multi-hop benchmark's arms).

:func:`hop_read` runs the question-following hop policy of :mod:`pmem.projections.multihop` over the
store's entity graph as of ``as_of``: the paths it took and the facts along them, then the facts of the
entity each finished path ends at (its last value, when an entity of that name has facts: the religion a
question names is also a subject, and "where did it come into existence" asks one of its facts, in words
no slot may have caught). Each entity's facts
are looked up by key in the graph projection (``Store.graph_facts``), once per read, so a read costs the
same at any store size and right after a write: the graph is never built.

:func:`graph_guided_context` (the benchmark's arm) = the single-shot read (top ``k`` cells) plus the
facts the cosine readout reaches; :func:`single_shot_context` is the baseline: the top ``k`` alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pmem.projections.graph import Fact
from pmem.projections.multihop import (
    BEAM,
    Path,
    cosine_facts,
    fact_line,
    follow_question,
    guided_facts,
    hop_budget,
    path_facts,
    question_entities,
    question_slots,
    question_spans,
)

END_FACTS = 4  # facts read of the entity a finished path ends at, nearest the question first


def cosine_scorer(embedder: Any) -> Any:
    """``(question, texts) -> cosines`` with ``embedder`` (unit vectors, so a dot product)."""

    def score(question: str, texts: Sequence[str]) -> list[float]:
        vecs = embedder.embed([question, *texts])
        return [float(x) for x in vecs[1:] @ vecs[0]]

    return score


class _Facts:
    """One read's view of the store's graph: each entity's open facts, looked up once by key."""

    def __init__(self, store: Any, as_of: int | None, namespace: str | None) -> None:
        self.store, self.as_of, self.namespace = store, as_of, namespace
        self.known: dict[str, list[Fact]] = {}

    def prefetch(self, slugs: Sequence[str]) -> None:
        """Look many entities up in one call (the question's word spans)."""
        wanted = [s for s in dict.fromkeys(slugs) if s not in self.known]
        if wanted:
            self.known.update(self.store.graph_facts(wanted, as_of=self.as_of, namespace=self.namespace))

    def facts_of(self, slug: str) -> list[Fact]:
        if slug not in self.known:
            self.known.update(self.store.graph_facts([slug], as_of=self.as_of, namespace=self.namespace))
        return self.known[slug]

    def is_entity(self, slug: str) -> bool:
        return bool(self.facts_of(slug))

    def name(self, slug: str) -> str:
        return slug.replace("_", " ")


@dataclass(frozen=True)
class HopRead:
    """What the hop policy found: the paths (best first, as ``a -> relation -> b`` text) and the facts
    to read, path facts first, then the cosine readout's where no path reached every slot."""

    paths: tuple[str, ...]
    facts: tuple[Fact, ...]


def hop_read(store: Any, question: str, embedder: Any, *, hops: int = 3, as_of: int | None = None,
             namespace: str | None = None, beam: int = BEAM, per_hop: int = 6) -> HopRead:
    """Follow the question's relations from the entities it names (see the module docstring)."""
    g = _Facts(store, as_of, namespace)
    g.prefetch([slug for *_, slug in question_spans(question)])
    seeds = question_entities(question, g.is_entity)
    if not seeds:
        return HopRead((), ())
    scorer = cosine_scorer(embedder)
    near = [f for s in seeds for f in g.facts_of(s)]  # the store's own attribute names, near the seeds
    relations = {f.relation for f in near} | {x.relation for f in near if f.obj for x in g.facts_of(f.obj)}
    paths: list[Path] = follow_question(question, seeds, g.facts_of, scorer, hops=hops, beam=beam,
                                        relations=relations)
    facts = path_facts(paths)
    if paths and paths[0].complete:
        facts += end_facts(question, [p for p in paths if p.complete], g.facts_of, scorer)
    else:
        budget = hop_budget(question_slots(question, relations, skip=seeds), hops)
        facts += cosine_facts(question, seeds, g.facts_of, scorer, hops=budget, per_hop=per_hop)
    return HopRead(tuple(p.text(g.name) for p in paths if p.hops), tuple({f.key: f for f in facts}.values()))


def end_facts(question: str, paths: Sequence[Path], facts_of: Any, scorer: Any, n: int = END_FACTS) -> list[Fact]:
    """The ``n`` facts nearest ``question`` of each entity the ``paths`` end at (none for a plain value)."""
    out: list[Fact] = []
    for end in dict.fromkeys(p.end for p in paths):
        own = list(facts_of(end))
        if own:
            scores = scorer(question, [f"{f.relation.replace('_', ' ')}: {f.value}" for f in own])
            ranked = sorted(range(len(own)), key=lambda i: (-float(scores[i]), i))
            out += [own[i] for i in ranked[:n]]
    return out


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
