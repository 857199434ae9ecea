"""Search from the log, for a store that cannot be written while its search projections lag.

The vector and lexical projections cannot be caught up there, so a search folds the namespace's
cells as of the searched index from the raw rows (as ``frontier`` does then: :class:`.reads.LogRows`),
embeds every open version's text exactly as the vector projection does (``key: value``,
:func:`pmem.projections.vectors.version_text`) and ranks the cells by their best version's cosine.
The vector channel only: no lexical channel, no fusion (docs/reliability.md). Slower than the
projections: the whole log up to that index is read and every open version embedded (a text the
store's text cache holds is not embedded again; a new one is cached in memory only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from pmem.adapters.service.bootstrap import EmbedderSlot
from pmem.domain.errors import StoreUnavailable
from pmem.domain.extraction.key_identity import is_system_key
from pmem.domain.state import OPEN
from pmem.projections.replay import EventSource, fold
from pmem.projections.vectors import version_text

if TYPE_CHECKING:
    from pmem.projections.vectors import SearchResult


def log_search(source: EventSource, embedders: EmbedderSlot, query: str, k: int, n: int, namespace: str, *,
               system: bool) -> list[SearchResult]:
    """The top ``k`` cells of ``namespace`` as of event ``n`` for ``query``, best first, each scored by
    the cosine of its nearest open version (``matched``: that version's value)."""
    from pmem.projections.vectors import SearchResult

    cells = [t for t in fold(source.indexed_events(1, n)).values()
             if t.state.namespace == namespace and (system or not is_system_key(t.state.key))]
    versions = [(i, v.value, version_text(t.state.key, v.value))
                for i, t in enumerate(cells) for v in t.state.versions if v.status in OPEN]
    if not versions:
        return []
    vectors = embedded(embedders, [query, *(text for _, _, text in versions)])
    scores = cosines(vectors[0], vectors[1:])
    best: dict[int, tuple[float, str]] = {}
    for (i, value, _), score in zip(versions, scores, strict=True):
        if i not in best or score > best[i][0]:
            best[i] = (score, value)
    ranked = sorted(best.items(), key=lambda item: (-item[1][0], cells[item[0]].state.key))[:k]
    return [SearchResult(cells[i].view(), score, value) for i, (score, value) in ranked]


def embedded(embedders: EmbedderSlot, texts: list[str]) -> np.ndarray:
    """``texts`` embedded by the store's embedder; where its text cache cannot be opened or written
    (the store file is read-only), by the same embedder behind a cache in memory."""
    try:
        return np.asarray(embedders.get().embed(texts), dtype=np.float32)
    except StoreUnavailable:
        return np.asarray(embedders.in_memory().embed(texts), dtype=np.float32)


def cosines(query: np.ndarray, vectors: np.ndarray) -> list[float]:
    """The cosine of ``query`` with each row of ``vectors`` (0 for a zero vector)."""
    norms = np.linalg.norm(vectors, axis=1) * float(np.linalg.norm(query))
    dots = vectors @ query
    return [float(d / m) if m > 0 else 0.0 for d, m in zip(dots, norms, strict=True)]
