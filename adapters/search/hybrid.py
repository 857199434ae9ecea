"""Hybrid search (docs/search.md): the vector channel and the lexical channel over the versions open at
one event index, fused by reciprocal rank, with a boost for the cells whose subject the question names.

- **Vector channel**: the ``DEPTH`` cells whose best open version's ``key: value`` is nearest the query
  (:func:`pmem.adapters.search.vector_search.top_cells`).
- **Lexical channel**: the ``DEPTH`` cells whose best open document (key words, value, evidence text;
  :mod:`pmem.adapters.readmodels.lexical_projection`) matches the query's rarer words best. A document
  counts only when its version is in the vector channel's set of open versions (the two projections
  number versions alike, and every match is checked against that set's cell and vid) and its event is
  at most the searched index.
- **Fusion**: :func:`pmem.projections.fusion.fused`. The version a result matched is the vector
  channel's best for the cell, else the lexical channel's.

System cells (keys starting with ``_``, such as ``_alias.*``) are left out unless ``system`` is true.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from pmem.adapters.readmodels.lexical_projection import LexicalProjection
from pmem.adapters.search.eligible import EligibleSet
from pmem.adapters.search.faiss_index import FaissIndex, Vectors
from pmem.adapters.search.vector_search import Hit, VectorSearch, top_cells
from pmem.domain.extraction.key_identity import is_system_key
from pmem.projections.fusion import fused
from pmem.projections.lexical import Phrases, subject_words, words

DEPTH = 32  # cells each channel proposes (at least 2k)
FIRST_MATCHES = 2  # documents the lexical channel reads first, per cell it wants; 4x more while it lacks cells
MAX_LIMIT = 2**62  # the most documents one lexical query asks for (a k near 2**63 must not overflow SQLite's LIMIT)
# The lexical channel runs beside the vector channel: SQLite's query and FAISS's scan both release the GIL,
# so on two cores a search costs about the slower channel instead of their sum (docs/search.md). Not with
# ``hnsw``, whose search is cheaper than the hand-off to the thread.
_BESIDE = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pmem-lexical")


@dataclass
class HybridSearch:
    """One search over a store's vector search and lexical projection (the caller holds the lock of the
    lexical projection's connection)."""

    vectors: VectorSearch
    lexical: LexicalProjection

    def search(self, query: str, k: int, as_of: int | None, namespace: str, *,
               system: bool = False, lexical: bool = True) -> tuple[int, list[Hit]]:
        """The top ``k`` cells, best first, each with its fused score, and the event index searched.
        ``lexical`` false: the vector channel alone, each cell with its cosine."""
        position = self.vectors.catch_up()
        if lexical:
            self.lexical.catch_up()
        n = position if as_of is None else min(as_of, position)
        eligible = self.vectors.eligible(namespace, n)
        if not len(eligible):
            return n, []
        index = self.vectors.index
        assert index is not None
        qv = self.vectors.embedder.embed([query])[0]
        if not lexical:
            return n, vector_channel(index, qv, eligible, k, system)
        depth = max(DEPTH, 2 * k)
        if index.kind == "hnsw":  # an HNSW search is short: a second thread would cost more CPU than it saves
            by_vector = vector_channel(index, qv, eligible, depth, system)
            by_words = self.lexical_channel(query, eligible, n, namespace, depth, system)
        else:
            words_later = _BESIDE.submit(self.lexical_channel, query, eligible, n, namespace, depth, system)
            by_vector = vector_channel(index, qv, eligible, depth, system)
            by_words = words_later.result()
        hits = {h.cell: h for h in (*by_words, *by_vector)}  # a cell in both: the vector channel's version
        cosine = {h.cell: h.score for h in by_vector}
        lexical_only = [h for c, h in hits.items() if c not in cosine]
        if lexical_only:
            ids = np.array([h.vector_id for h in lexical_only], dtype=np.int64)
            cosine.update({h.cell: float(s) for h, s in zip(lexical_only, index.scores(qv, ids), strict=True)})
        asked = Phrases(words(query))
        boosted = {c for c, h in hits.items() if asked.names(subject_words(h.key))}
        ranked = fused([[h.cell for h in by_vector], [h.cell for h in by_words]], boosted, cosine)
        return n, [Hit(c, hits[c].key, hits[c].vid, hits[c].vector_id, score) for c, score in ranked[:k]]

    def lexical_channel(self, query: str, eligible: EligibleSet, n: int, namespace: str, depth: int,
                        system: bool) -> list[Hit]:
        """The ``depth`` cells whose best open document ranks first, best first (score: the document's)."""
        terms, weights = self.lexical.terms(query)
        if not terms:
            return []
        out: dict[str, Hit] = {}
        limit = min(FIRST_MATCHES * depth, MAX_LIMIT)
        while True:
            matches = self.lexical.matches({t: weights[t] for t in terms}, namespace, n, limit)
            for version_id, cell, vid, ns, event_index, score in matches:
                e = eligible.by_id.get(version_id)
                if (e is None or e.cell != cell or e.vid != vid or ns != namespace or event_index > n or cell in out
                        or (is_system_key(e.key) and not system)):
                    continue
                out[cell] = Hit(cell, e.key, vid, version_id, score)
                if len(out) == depth:
                    return list(out.values())
            if len(matches) < limit:
                return list(out.values())
            out.clear()
            limit = min(4 * limit, MAX_LIMIT)


def vector_channel(index: FaissIndex, qv: Vectors, eligible: EligibleSet, depth: int, system: bool) -> list[Hit]:
    """The ``depth`` cells nearest the query (system cells left out unless ``system``), best first."""
    want = depth
    while True:
        hits = top_cells(index, qv, eligible, want)
        kept = hits if system else [h for h in hits if not is_system_key(h.key)]
        if len(kept) >= depth or len(hits) < want:
            return kept[:depth]
        want *= 4
