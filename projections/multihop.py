"""Graph-guided multi-hop readout: follow value -> subject links from the entities a question names.

Pure. Starting from the entities whose names appear in the question, each hop adds the ``per_hop``
facts of the current entities that score best against the question (the caller supplies the scorer,
usually embedding cosine), then moves on to the entities those facts' values name. So "the spouse of
the author of X" reads ``x.author = A``, then A's facts, then the spouse's, within the budget of
docs/reading.md iterative readout (up to 3 follow-ups of 6 cells).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pmem.projections.graph import EntityGraph, Fact, entity_slug

Scorer = Callable[[str, Sequence[str]], Sequence[float]]  # (question, texts) -> one score per text
MIN_SLUG = 3


def fact_line(f: Fact) -> str:
    """How a fact reads in a context: ``key = value`` (docs/reading.md)."""
    return f"{f.key} = {f.value}"


def named_entities(g: EntityGraph, question: str) -> list[str]:
    """Entities with facts whose slug occurs in the question's slug (word-aligned), longest first,
    leaving out one that is only part of a longer match."""
    q = f"_{entity_slug(question)}_"
    found = sorted((s for s, e in g.entities.items() if e.facts and len(s) >= MIN_SLUG and f"_{s}_" in q),
                   key=lambda s: (-len(s), s))
    kept: list[str] = []
    for s in found:
        if not any(f"_{s}_" in f"_{k}_" for k in kept):
            kept.append(s)
    return kept


def guided_facts(g: EntityGraph, question: str, scorer: Scorer, *, hops: int = 3, per_hop: int = 6,
                 seeds: Sequence[str] = ()) -> list[Fact]:
    """The facts the readout adds, hop by hop (at most ``hops * per_hop``)."""
    frontier = list(dict.fromkeys([*named_entities(g, question), *seeds]))
    chosen: list[Fact] = []
    seen: set[str] = set()
    for _ in range(hops):
        pool = [f for s in frontier if s in g.entities for f in g.entities[s].facts if f.key not in seen]
        if not pool:
            break
        scores = scorer(question, [f"{f.relation.replace('_', ' ')}: {f.value}" for f in pool])
        ranked = sorted(zip(scores, range(len(pool)), strict=True), key=lambda p: (-p[0], p[1]))
        picked = [pool[i] for _, i in ranked[:per_hop]]
        chosen += picked
        seen.update(f.key for f in picked)
        frontier = list(dict.fromkeys(f.obj for f in picked if f.obj))
    return chosen
