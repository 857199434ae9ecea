"""The search use cases: the cells that best match a text, the context an agent reads, the entity graph."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from uuid import UUID

from pmem.adapters.service.bootstrap import Wiring
from pmem.adapters.service.reads import Reads, disclosures
from pmem.domain.errors import InvalidOperation
from pmem.projections.graph import EntityGraph
from pmem.projections.reading import ReadResult

if TYPE_CHECKING:
    from pmem.projections.vectors import SearchResult

DEFAULT_K = 12  # retrieval returns the top L = 12 cells


class Searches:
    """Vector search over open versions, context reading, and the graph projection."""

    def __init__(self, wiring: Wiring, reads: Reads) -> None:
        self.w = wiring
        self.reads = reads

    def search(self, query: str, k: int = DEFAULT_K, *, as_of: int | None = None,
               namespace: str | None = None) -> list[SearchResult]:
        if not isinstance(query, str) or not query.strip():
            raise InvalidOperation("query must be a non-empty string", field="query")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise InvalidOperation(f"k must be a positive integer, got {k!r}", field="k")
        if as_of is not None and as_of < 0:
            raise InvalidOperation(f"as_of must be a non-negative event index, got {as_of}", field="as_of")
        from pmem.projections.vectors import SearchResult

        n, hits = self.w.vector_search().search(query, k, as_of, namespace or self.w.namespace)
        out = []
        for h in hits:
            t = self.reads.timeline(UUID(h.cell), n)
            assert t is not None  # an open version implies the cell has events up to n
            matched = next(v.value for v in t.history().versions if v.vid == h.vid)
            out.append(SearchResult(t.view(), h.score, matched))
        return out

    def read(self, memory: Any, question: str, *, mode: str, k: int, budget: int | None,
             disclose: Iterable[str], as_of: int | None, namespace: str | None) -> ReadResult:
        """The context for ``question``, read through ``memory`` (the store: see :mod:`.reader`)."""
        from pmem.adapters.service.reader import Reader

        return Reader(memory).read(question, mode=mode, k=k, budget=budget, disclose=disclosures(disclose),
                                   as_of=as_of, namespace=namespace)

    def graph(self, *, as_of: int | None = None, namespace: str | None = None, embed: bool = False,
              threshold: float | None = None) -> EntityGraph:
        with self.w.lock:
            projection = self.w.projections["graph"]
            projection.catch_up()
            g: EntityGraph = projection.graph(namespace or self.w.namespace, as_of)
        if embed:
            from pmem.adapters.graph.view import ASSOCIATION_THRESHOLD, cosine_associations

            cosine_associations(g, self.w.embedders.get(), ASSOCIATION_THRESHOLD if threshold is None else threshold)
        return g
