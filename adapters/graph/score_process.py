"""Scoring a namespace in a child process, so that a server's request threads do not wait for it.

Building a namespace's graph and scoring it (PageRank, communities) is 0.5 s or more of Python at 20,000
cells, and a process runs one thread's Python at a time (the GIL): in the server's score worker thread it
makes every request thread wait for its turns, so a ``get`` of a few ms takes tens. In a child process
it runs beside them, on another core. Only plain data crosses: the fact rows and the stored seed in, the
values to store out; the child opens no store.

The child is started by forkserver (spawn where there is none), never by fork: a server has threads, and
a forked child would copy the locks they hold (so, as for any spawned child, the program's main module
must be safe to import: ``pmem``'s is). It is started by the first round and kept for the next ones. One
that died (killed, out of memory) fails the round it was running with ``BrokenProcessPool``, which the
worker raises to its waiters like any failure; the next round starts another.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

T = TypeVar("T")
Rows = list[tuple[Any, ...]]  # a namespace's open ``graph_facts`` rows (:func:`~pmem.projections.graph.build_graph`)
Seed = dict[str, tuple[float, int]]  # entity -> its stored PageRank and community
OWNER_WATCH_S = 0.5  # how often the child looks whether the process that started it is still there
Scores = tuple[dict[str, tuple[Any, ...]], float]  # what the graph projection stores, and the maximum importance


def score_namespace(rows: Rows, seed: Seed) -> Scores:
    """What the graph projection stores for a namespace's open fact ``rows``, carried on from ``seed``
    (:func:`pmem.adapters.graph.scores.stored_values` of its graph without P-Mem's own cells)."""
    from pmem.adapters.graph.scores import stored_values
    from pmem.projections.graph import build_graph, without_system

    return stored_values(without_system(build_graph(rows)), seed)


class ScoreProcess:
    """One child process that runs functions for a score worker, started when first needed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None
        self._closed = False

    def score(self, rows: Rows, seed: Seed) -> Scores:
        """:func:`score_namespace` in the child."""
        return self.run(score_namespace, rows, seed)

    def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in the child (``fn`` module-level, its arguments and result picklable). Raises
        ``BrokenProcessPool`` if the child dies meanwhile; the next call starts another."""
        pool = self._started()
        try:
            future = pool.submit(fn, *args)
        except BrokenProcessPool:  # it died between two calls: nothing was lost, start another now
            self._drop(pool)
            future = self._started().submit(fn, *args)
        try:
            return future.result()
        except BrokenProcessPool:
            self._drop(pool)
            raise

    def close(self) -> None:
        """Stop the child, at once: a score worker that closes stores nothing more."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            _stop(pool)

    def _started(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._closed:
                raise RuntimeError("the score process is closed")
            if self._pool is None:
                methods = multiprocessing.get_all_start_methods()
                context = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
                self._pool = ProcessPoolExecutor(1, mp_context=context, initializer=_child_started,
                                                 initargs=(os.getpid(),))
            return self._pool

    def _drop(self, pool: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._pool is pool:
                self._pool = None
        _stop(pool)


def _stop(pool: ProcessPoolExecutor) -> None:
    # Python 3.11 has no public way to end a running call: without it, the interpreter's exit would wait
    # for a round in progress (seconds) before a server could stop.
    children = list((pool._processes or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for child in children:
        child.terminate()


def _child_started(owner: int) -> None:
    # Ctrl-C reaches the whole process group: the server stops the child itself (``close``), and an
    # interrupted idle child would only print a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_without, args=(owner,), name="pmem-owner-watch", daemon=True).start()


def _exit_without(owner: int) -> None:
    """End this child once the process that started it is gone (killed, say): it would wait forever on
    its call queue, and it holds the forkserver's alive pipe, so the forkserver would wait forever too."""
    while True:
        time.sleep(OWNER_WATCH_S)
        try:
            os.kill(owner, 0)
        except ProcessLookupError:
            os._exit(0)
        except PermissionError:  # (a pid taken again by another user's process: the owner is gone too)
            os._exit(0)
