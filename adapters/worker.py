"""``pmem worker --projection NAME``: one store's projection(s) followed by this process.

The composition root of a worker: it builds the :class:`adapters.follower.Follower` targets from a
:class:`adapters.api.Store`, registers the heartbeat, turns SIGTERM and SIGINT into a stop request
(the batch in flight commits, then the loop leaves) and prints JSON lines: one per committed batch,
and a last one with the events applied and why it stopped.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any

from adapters.follower import Follower, PollingWait, Target, WaitForEvents
from adapters.heartbeat import SqliteHeartbeat

DEFAULT_INTERVAL_S = 0.2  # SQLite polls: the lag a quiet store sees, at one cheap query per interval
DEFAULT_HEARTBEAT_S = 1.0


def targets(store: Any, name: str, batch_size: int | None = None) -> list[Target]:
    """The followed projections for ``name`` (a projection, or ``all``), each at its own batch size."""
    from adapters.api import PROJECTION_NAMES, VECTORS

    out: list[Target] = []
    for n in PROJECTION_NAMES if name == "all" else (name,):
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


def run_worker(store: Any, name: str, *, interval: float = DEFAULT_INTERVAL_S, batch_size: int | None = None,
               heartbeat_s: float = DEFAULT_HEARTBEAT_S, wait: WaitForEvents | None = None,
               emit: Callable[[dict[str, Any]], None] = lambda _: None) -> dict[str, Any]:
    """Follow ``store``'s log for projection ``name`` until SIGTERM or SIGINT; return the summary line."""
    followed = targets(store, name, batch_size)
    stopping = threading.Event()
    received: list[str] = []

    def on_signal(signum: int, _frame: Any) -> None:
        received.append(signal.Signals(signum).name)
        stopping.set()

    # Handlers go in before the heartbeat row announces this worker, so a SIGTERM sent to a worker
    # that stats shows as started always stops it gracefully.
    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        heartbeat = SqliteHeartbeat(store.projection_db, store.log_store.db, [t.name for t in followed],
                                    heartbeat_s)
        follower = Follower(store.log_store, followed, wait or PollingWait(store.log_store, interval), heartbeat,
                            heartbeat_s, emit)
        applied = follower.run(stopping)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    last = store.last_index()
    return {"stopped": received[0] if received else "done", "applied": applied,
            "projections": {t.name: {"position": t.position(), "lag": max(last - t.position(), 0)}
                            for t in followed}}
