"""Search-ready after a large ingest: ``pmem ingest`` brings the search projections up before it returns
(``apply`` does not: see docs/decisions.md).

Without this, the first search after a large write pays for the whole vector index (every new version
embedded), the lexical tables and the frontier it shows the cells from. A writer whose write left at
least :data:`EAGER_MIN` events the search projections lack catches them up itself at its end, outside
the write transactions: the frontier, the lexical tables, the vector tables and the FAISS cache file
(embedding in batches). Each is tracked by position, so a crash half-way leaves them behind but
correct, and the next catch-up (a search, a worker, the next write) resumes from their position.

A writer leaves the work alone when

* a live ``pmem worker`` follows the projection (its heartbeat says so): the worker does it;
* fewer than :data:`EAGER_MIN` events are behind: a search embeds a few texts faster than a writer
  loads the model;
* ``PMEM_EAGER_INDEX=0`` is set (today's behaviour: the first search builds the index);
* the embedder cannot be loaded (not installed): the write succeeds, and search reports the problem.

See docs/decisions.md, "Search-ready soon after ingest".
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from pmem.adapters.readmodels.registry import FRONTIER, LEXICAL, VECTORS
from pmem.adapters.readmodels.tracked_projection import tracked_position
from pmem.domain.errors import EmbedderUnavailable

if TYPE_CHECKING:
    from pmem.adapters.service.store import Store

EAGER_MIN = 256  # events behind before a writer indexes them itself (fewer embed faster than it loads the model)
ENV = "PMEM_EAGER_INDEX"


def enabled() -> bool:
    """False when ``PMEM_EAGER_INDEX`` is ``0`` (or ``off``/``false``/``no``): the first search indexes."""
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "off", "false", "no")


class EagerIndex:
    """Called once at the end of a write (``finish``), after its last transaction committed."""

    def __init__(self, store: Store, minimum: int = EAGER_MIN, on: bool | None = None) -> None:
        self.store = store
        self.minimum = minimum
        self.on = enabled() if on is None else on
        self.seconds = 0.0  # spent indexing, for the benchmark
        self._mine: list[str] | None = None  # the projections this writer keeps, decided once

    def finish(self) -> None:
        """Index what the write added, if enough is behind. Once, at the end: indexing after each batch
        costs more in all (the FAISS file rewritten as it grows, the lexical tables in small steps)."""
        self._advance(self.minimum)

    def _advance(self, minimum: int) -> None:
        if not self.on:
            return
        started = time.perf_counter()
        w = self.store._w  # the wiring's lock: the projections share one connection
        with w.lock:
            mine = self._projections()
            last = w.events.last_index()
            behind = [n for n in mine if last - tracked_position(w.projection_db, n) >= minimum]
            for name in behind:
                if name == VECTORS:
                    self._vectors()
                else:
                    w.projections[name].catch_up()
        self.seconds += time.perf_counter() - started

    def _projections(self) -> list[str]:
        """The projections a search reads (the frontier for the cells it shows, the lexical and vector
        indexes to rank them) that no live worker follows (read once per write)."""
        if self._mine is None:
            from pmem.adapters.readmodels.heartbeat import workers

            followed = {n for n, w in workers(self.store._w.projection_db).items() if w["alive"]}
            self._mine = [n for n in (FRONTIER, LEXICAL, VECTORS) if n not in followed]
        return self._mine

    def _vectors(self) -> None:
        try:
            self.store.vector_search().catch_up()
        except EmbedderUnavailable:
            assert self._mine is not None
            self._mine.remove(VECTORS)  # the write stands; the search that needs vectors says why
