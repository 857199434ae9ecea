"""Hybrid ranking's pure part (docs/search.md): reciprocal-rank fusion of ranked channels, plus a boost
for the cells whose subject the question names.

A cell's fused score is ``sum over channels of 1 / (RRF_K + rank)`` (rank 1 first; a channel that did
not return the cell adds nothing), plus :data:`SUBJECT_BOOST` when the question names the cell's
subject (:func:`pmem.projections.lexical.names_subject`), plus ``TIE_BREAK * cosine``: equal fused
scores are ordered by the cosine of the cell's best version, and the score a result shows is the
one it was ordered by.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

RRF_K = 60  # the usual constant of reciprocal-rank fusion (Cormack et al. 2009)
SUBJECT_BOOST = 2.0 / (RRF_K + 1)  # as much as ranking first in two more channels
TIE_BREAK = 1e-6  # weight of the cosine in the fused score: it only orders equal fusions


def rrf(channels: Sequence[Sequence[str]], k: int = RRF_K) -> dict[str, float]:
    """Reciprocal-rank fusion of ranked lists of ids (best first; an id counts at its first place)."""
    out: dict[str, float] = {}
    for ranking in channels:
        seen: set[str] = set()
        for rank, item in enumerate(ranking, start=1):
            if item not in seen:
                seen.add(item)
                out[item] = out.get(item, 0.0) + 1.0 / (k + rank)
    return out


def fused(channels: Sequence[Sequence[str]], boosted: Collection[str], cosine: Mapping[str, float], *,
          k: int = RRF_K, boost: float = SUBJECT_BOOST) -> list[tuple[str, float]]:
    """Every id of the channels with its fused score, best first (ties: by id)."""
    scores = rrf(channels, k)
    for item in scores:
        scores[item] += (boost if item in boosted else 0.0) + TIE_BREAK * cosine.get(item, 0.0)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
