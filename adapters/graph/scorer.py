"""The worker that keeps a store's stored ``next`` scores current, so that no request computes them.

One daemon thread per open store, started by the first request that finds its namespace's scores stale
(:meth:`ScoreWorker.wait`). Each round it catches the graph projection up and re-scores every namespace
whose facts changed: reading the fact rows and the stored scores, and storing the new ones, take the
store's lock; building the graph and scoring it (:func:`pmem.adapters.graph.scores.stored_values`, carried
on from the stored PageRank and communities) run without it, so other requests go on. Scores computed
from a graph that a later
write changed are not stored (:meth:`~pmem.adapters.readmodels.graph_projection.GraphProjection.store_scores`)
and the next round scores again. A failure is kept and raised to the requests that wait.

A server's worker (``apart``) builds and scores in a child process (:mod:`.score_process`), so the
server's other threads do not wait for the GIL meanwhile. Others score in their thread: a one-shot
command (``pmem next``) has no other thread to leave the GIL to, and a child would add its start.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from pmem.adapters.graph.score_process import Rows, ScoreProcess, Scores, Seed, score_namespace


class ScoreWorker:
    """Re-scores the dirty namespaces of ``projection`` (a graph projection) in a background thread."""

    def __init__(self, projection: Any, lock: AbstractContextManager[Any], *, apart: bool = False) -> None:
        self.projection = projection
        self.lock = lock
        self.process = ScoreProcess() if apart else None  # where a round scores: None, in this thread
        self.rounds = 0  # finished rounds: a waiter sleeps only while none finished since it looked
        self.failure: BaseException | None = None
        self._wake = threading.Condition()
        self._asked = False
        self._closed = False
        self._thread: threading.Thread | None = None

    def wait(self, current: Callable[[], bool], timeout: float | None) -> bool:
        """Ask for a round and wait until ``current()`` (read under the store's lock) or ``timeout`` seconds
        pass (None: no limit); return whether it became current. Raises what the last round raised."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._wake:
                seen = self.rounds
            with self.lock:
                if current():
                    return True
            with self._wake:
                if self.failure is not None:
                    failure, self.failure = self.failure, None
                    raise failure
                self._start()
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    return False
                if self.rounds == seen:
                    self._wake.wait(left)

    def close(self) -> None:
        """Stop after the current round; a round in progress stores nothing more."""
        with self._wake:
            self._closed = True
            self._wake.notify_all()
        if self.process is not None:
            self.process.close()

    def _start(self) -> None:
        self._asked = True
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="pmem-graph-scores", daemon=True)
            self._thread.start()
        self._wake.notify_all()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._asked and not self._closed:
                    self._wake.wait()
                if self._closed:
                    return
                self._asked = False
            try:
                self._round()
            except BaseException as e:  # kept for the waiters: a worker thread has no caller to raise to
                with self._wake:
                    self.failure = e
            with self._wake:
                self.rounds += 1
                self._wake.notify_all()

    def _round(self) -> None:
        with self.lock, self.projection.fold_lock:  # (the lock a server's stores fold under)
            if self._closed:
                return
            self.projection.catch_up()
            todo = self.projection.dirty()
        for ns in todo:
            with self.lock:
                if self._closed:
                    return
                position, rows, seed = self.projection.rows_to_score(ns)
            values, top = self._score(rows, seed)  # built without the lock too
            with self.lock:
                if self._closed:
                    return
                if not self.projection.store_scores(ns, position, values, top):
                    with self._wake:
                        self._asked = True  # changed meanwhile: score it again

    def _score(self, rows: Rows, seed: Seed) -> Scores:
        if self.process is None:
            return score_namespace(rows, seed)
        return self.process.score(rows, seed)
