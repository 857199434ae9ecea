"""``pmem worker --projection NAME``: one store's projection(s) followed by this process.

The composition root of a worker: it builds the :class:`pmem.adapters.readmodels.follower.Follower` targets from a
:class:`pmem.adapters.service.store.Store`, registers the heartbeat, turns SIGTERM and SIGINT into a stop request
(the batch in flight commits, then the loop leaves) and prints JSON lines: one per committed batch,
and a last one with the events applied and why it stopped.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any

from pmem.adapters.readmodels.follower import Follower, NotifiedWait, PollingWait, Target, WaitForEvents
from pmem.adapters.readmodels.heartbeat import DbHeartbeat
from pmem.adapters.readmodels.registry import VECTORS, selected

DEFAULT_INTERVAL_S = 0.2  # SQLite polls: the lag a quiet store sees, at one cheap query per interval
DEFAULT_WATCHDOG_S = 1.0  # PostgreSQL is notified: the re-poll only bounds the lag after a lost NOTIFY
DEFAULT_HEARTBEAT_S = 1.0


def targets(store: Any, name: str, batch_size: int | None = None) -> list[Target]:
    """The followed projections for ``name`` (a projection, or ``all``), each at its own batch size."""
    out: list[Target] = []
    for n in selected(name):
        if n == VECTORS:
            vectors = store.vector_search()
            out.append(Target(n, batch_size or vectors.projection.chunk, vectors.projection.position,
                              _counted(vectors)))
        else:
            p = store.projections[n]
            out.append(Target(n, batch_size or p.batch_size, p.position, p.catch_up))
    return out


def _counted(vectors: Any) -> Callable[[int], int]:
    """``advance`` for the vector projection: catch tables and index up, count what this process folded."""
    def advance(target: int) -> int:
        before = vectors.projection.applied
        vectors.catch_up(target)
        return int(vectors.projection.applied - before)
    return advance


def default_wait(store: Any, interval: float | None = None) -> tuple[str, WaitForEvents, Callable[[], None]]:
    """How a worker of ``store`` waits for events, and how to let go of it: on PostgreSQL it LISTENs
    (:class:`pmem.adapters.eventstore.pg_log.PgNotifications`) with a watchdog re-poll every ``interval`` seconds
    (default 1); on SQLite, which cannot notify another process, it polls every ``interval``
    seconds (default 0.2)."""
    from pmem.adapters.storage.backend import PgBackend

    backend = store.backend
    if isinstance(backend, PgBackend):
        from pmem.adapters.eventstore.pg_log import PgNotifications

        notifications = PgNotifications(backend.conninfo, store.log_store.recorder.channel_name, backend.label)
        return ("notified", NotifiedWait(store.log_store, notifications, interval or DEFAULT_WATCHDOG_S),
                notifications.close)
    return "polling", PollingWait(store.log_store, interval or DEFAULT_INTERVAL_S), _nothing


def _nothing() -> None:
    """Nothing to let go of (SQLite's polling holds no connection of its own)."""


def run_worker(store: Any, name: str, *, interval: float | None = None, batch_size: int | None = None,
               heartbeat_s: float = DEFAULT_HEARTBEAT_S, wait: WaitForEvents | None = None,
               emit: Callable[[dict[str, Any]], None] = lambda _: None) -> dict[str, Any]:
    """Follow ``store``'s log for projection ``name`` until SIGTERM or SIGINT; return the summary line.
    ``wait`` replaces the backend's own way of waiting (:func:`default_wait`), as tests do."""
    followed = targets(store, name, batch_size)
    stopping = threading.Event()
    received: list[str] = []

    def on_signal(signum: int, _frame: Any) -> None:
        received.append(signal.Signals(signum).name)
        stopping.set()

    # Handlers go in before the heartbeat row announces this worker, so a SIGTERM sent to a worker
    # that stats shows as started always stops it gracefully.
    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    kind, release = "custom", _nothing
    try:
        if wait is None:
            kind, wait, release = default_wait(store, interval)
        heartbeat = DbHeartbeat(store.projection_db, store.log_store.db, [t.name for t in followed], heartbeat_s)
        follower = Follower(store.log_store, followed, wait, heartbeat, heartbeat_s, emit)
        applied = follower.run(stopping)
    finally:
        release()
        for s, handler in previous.items():
            signal.signal(s, handler)
    last = store.last_index()
    recovered = {"recovered": wait.recovered} if isinstance(wait, NotifiedWait) else {}
    return {"stopped": received[0] if received else "done", "applied": applied, "wait": kind, **recovered,
            "projections": {t.name: {"position": t.position(), "lag": max(last - t.position(), 0)}
                            for t in followed}}
