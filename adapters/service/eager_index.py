"""Search-ready after a large ingest: ``pmem ingest`` brings the search projections up as it goes (``apply``
does not: see docs/decisions.md).

Without this, the first search after a large write pays for the whole vector index (every new version
embedded) and the lexical tables. A writer that has just committed a chunk of at least
:data:`EAGER_MIN` events the search projections lack catches them up itself, outside the write
transaction: the vector tables, the FAISS cache file (embedding in batches) and the lexical tables.
Both are tracked by position, so a crash half-way leaves them behind but correct, and the next catch-up
(a search, a worker, the next write) resumes from their position.

A writer leaves the work alone when

* a live ``pmem worker`` follows the projection (its heartbeat says so): the worker does it;
* fewer than :data:`EAGER_MIN` events are behind: a search embeds a few texts faster than a writer
  loads the model;
* ``PMEM_EAGER_INDEX=0`` is set (today's behaviour: the first search builds the index);
* the embedder cannot be loaded (not installed): the write succeeds, and search reports the problem.

See docs/decisions.md (issue 19, "Search-ready soon after ingest").
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from pmem.adapters.readmodels.registry import VECTORS
from pmem.adapters.readmodels.tracked_projection import tracked_position
from pmem.domain.errors import EmbedderUnavailable

if TYPE_CHECKING:
    from pmem.adapters.service.store import Store

EAGER_MIN = 256  # events behind before a writer indexes them itself (about a second of embedding)
ENV = "PMEM_EAGER_INDEX"
LEXICAL = "lexical"


def enabled() -> bool:
    """False when ``PMEM_EAGER_INDEX`` is ``0`` (or ``off``/``false``/``no``): the first search indexes."""
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "off", "false", "no")


class EagerIndex:
    """Called after each committed chunk of one write (``after_commit``) and once at its end (``finish``)."""

    def __init__(self, store: Store, minimum: int = EAGER_MIN, on: bool | None = None) -> None:
        self.store = store
        self.minimum = minimum
        self.on = enabled() if on is None else on
        self.seconds = 0.0  # spent indexing, for the benchmark
        self._mine: list[str] | None = None  # the projections this writer keeps, decided once
        self._started = False  # indexed once in this write: finish the tail too

    def after_commit(self) -> None:
        """Index what the committed chunks added, if enough is behind."""
        self._advance(self.minimum)

    def finish(self) -> None:
        """At the end of the write: index the tail too if this write indexed before (the first search
        then embeds nothing), else only if enough is behind."""
        self._advance(1 if self._started else self.minimum)

    def _advance(self, minimum: int) -> None:
        if not self.on:
            return
        started = time.perf_counter()
        w = self.store._w  # the wiring's lock: the projections share one connection
        with w.lock:
            mine = self._projections()
            last = w.events.last_index()
            behind = [n for n in mine if last - tracked_position(w.projection_db, n) >= minimum]
            if behind:
                self._started = True
            for name in behind:
                if name == VECTORS:
                    self._vectors()
                else:
                    w.projections[name].catch_up()
        self.seconds += time.perf_counter() - started

    def _projections(self) -> list[str]:
        """The search projections no live worker follows (read once per write)."""
        if self._mine is None:
            from pmem.adapters.readmodels.heartbeat import workers

            followed = {n for n, w in workers(self.store._w.projection_db).items() if w["alive"]}
            self._mine = [n for n in (LEXICAL, VECTORS) if n not in followed]
        return self._mine

    def _vectors(self) -> None:
        try:
            self.store.vector_search().catch_up()
        except EmbedderUnavailable:
            assert self._mine is not None
            self._mine.remove(VECTORS)  # the write stands; the search that needs vectors says why
