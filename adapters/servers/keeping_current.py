"""A server process's projections kept current off the request path (docs/server.md, "Reads and the
projections").

A read folds only what its own namespace lacks (``TrackedProjection.catch_up_for``), so the events of
other tenants are left to someone else: this thread, with a store of its own, folds every projection up
to the end of the log soon after it grows. A write answered by the process wakes it at once
(:meth:`KeepCurrent.nudge`); writes through other processes are seen by polling the log's last index
every :data:`POLL_S` seconds. It folds each projection under the lock the process's stores share for
it, so a read that needs the same events waits for them instead of folding them again. The vector
projection's tables are kept current, not this thread's own FAISS index (each store keeps its own and
reads the new vectors from the tables).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from pmem.adapters.servers.store_pool import ServedStore
from pmem.domain.errors import EmbedderUnavailable, PmemError

POLL_S = 0.1  # how often the log is looked at for other processes' writes
BACKOFF_S = 1.0  # the wait after a catch-up failed (a store that cannot be written, a database gone)

log = logging.getLogger("pmem.server")


class KeepCurrent:
    """One thread folding the projections of a store made by ``open_store``, until :meth:`stop`."""

    def __init__(self, open_store: Callable[[], ServedStore]) -> None:
        self._open = open_store
        self._wake, self._stopping = threading.Event(), threading.Event()
        self._thread: threading.Thread | None = None
        self.folded = 0  # events this thread applied, over every projection
        self._vectors = True

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="pmem-keep-current", daemon=True)
        self._thread.start()

    def nudge(self) -> None:
        """The log grew (a write this process answered): fold it now rather than at the next poll."""
        self._wake.set()

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        store = self._open()
        try:
            while not self._stopping.is_set():
                self._wake.clear()
                wait = POLL_S
                try:
                    self.folded += self.fold(store)
                except PmemError as e:
                    log.warning("projections not kept current: %s", e)
                    wait = BACKOFF_S
                self._wake.wait(wait)
        finally:
            store.close()

    def fold(self, store: ServedStore) -> int:
        """Catch every projection of ``store`` up to the end of the log, each under its shared lock (the
        vector tables while the embedder loads); returns the events applied."""
        last = store.last_index()
        applied = 0
        for projection in store.projections.values():
            if projection.position() < last:
                with projection.fold_lock:
                    applied += projection.catch_up()
        if self._vectors:
            try:
                vectors = store.vector_search().projection
            except EmbedderUnavailable as e:
                log.warning("vectors not kept current: %s", e)
                self._vectors = False  # a search says why; the other projections are still followed
                return applied
            if vectors.position() < last:
                before = vectors.applied
                vectors.catch_up()
                applied += vectors.applied - before
        return applied
