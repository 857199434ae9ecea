"""The graph-guided multi-hop readout over a store, callable from any evaluation (issue 5's table).

:func:`graph_guided_context` = the single-shot read (vector search, top ``k`` cells) plus the facts
:func:`projections.multihop.guided_facts` reaches from the entities the question names, ranked at
each hop by cosine to the question with the given embedder. :func:`single_shot_context` is the
baseline arm: the top ``k`` cells alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pmem.projections.multihop import fact_line, guided_facts


def cosine_scorer(embedder: Any) -> Any:
    """``(question, texts) -> cosines`` with ``embedder`` (unit vectors, so a dot product)."""

    def score(question: str, texts: Sequence[str]) -> list[float]:
        vecs = embedder.embed([question, *texts])
        return [float(x) for x in vecs[1:] @ vecs[0]]

    return score


def single_shot_context(store: Any, question: str, k: int = 12, *, as_of: int | None = None) -> list[str]:
    """The top ``k`` cells for the question, as ``key = value`` lines."""
    return [f"{r.cell.key} = {r.cell.value}" for r in store.search(question, k, as_of=as_of)]


def graph_guided_context(store: Any, question: str, embedder: Any, k: int = 12, *, hops: int = 3,
                         per_hop: int = 6, as_of: int | None = None) -> list[str]:
    """The single-shot context plus up to ``hops * per_hop`` facts found by following value -> subject
    links from the entities the question names."""
    base = single_shot_context(store, question, k, as_of=as_of)
    g = store.graph(as_of=as_of)
    extra = guided_facts(g, question, cosine_scorer(embedder), hops=hops, per_hop=per_hop)
    return list(dict.fromkeys([*base, *(fact_line(f) for f in extra)]))
