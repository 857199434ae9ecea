"""A projection followed in its own process (``pmem worker``): the loop, and how it waits for events.

    Follower.run(stopping)
        until stopping is set:
            for each target: if position < last index, apply ONE batch (rows and position in one
                             transaction, exactly as a catch-up on read does), and report it
            nothing to do:   wait.wait(position, timeout, stopping)   <- the pluggable part
            every heartbeat interval: beat (pid, time, position) into the store

Batches are the unit of safety. The loop checks ``stopping`` only between batches, so SIGTERM or
SIGINT lets the batch in flight commit and then exits; SIGKILL rolls it back with the transaction.
Either way the position moved with the rows, so a restart resumes after the last committed batch,
and a reader catching up on read at the same moment finds the position moved and skips that
batch (see :mod:`pmem.adapters.readmodels.tracked_projection`): no event is applied twice, none is skipped.

How to wait is a strategy (:class:`WaitForEvents`), because backends differ:

- SQLite has no push notifications: :class:`PollingWait` sleeps ``interval`` seconds (in short
  slices, so a stop request is seen at once) and lets the loop re-read the last index.
- PostgreSQL notifies: :class:`pmem.adapters.eventstore.pg_log.PgNotifications` (LISTEN on the channel the log
  NOTIFYs) is the :class:`Notifications` source of a :class:`NotifiedWait`, which also re-polls
  the log every ``watchdog_s`` seconds: a lost notification (upstream eventsourcing issues
  #305/#306) then costs at most one watchdog period, never a stalled worker. Which one a worker
  uses is decided in :func:`pmem.adapters.entrypoints.worker.default_wait`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

SLICE_S = 0.05  # how often a wait looks at the stop flag


class Stopping(Protocol):
    """A stop request, set from a signal handler or another thread (``threading.Event`` fits)."""

    def is_set(self) -> bool: ...


class LastIndex(Protocol):
    """What waiting needs from the log."""

    def last_index(self) -> int: ...


class WaitForEvents(Protocol):
    """Block until the log may hold events after ``position``, ``stopping`` is set, or ``timeout``
    seconds passed; return True when new events are known to be there. Returning early is always
    safe (the loop re-reads the last index); returning late only adds lag."""

    def wait(self, position: int, timeout: float, stopping: Stopping) -> bool: ...


def _sleep(seconds: float, stopping: Stopping) -> None:
    deadline = time.monotonic() + seconds
    while not stopping.is_set() and (left := deadline - time.monotonic()) > 0:
        time.sleep(min(SLICE_S, left))


@dataclass
class PollingWait:
    """SQLite: sleep ``interval`` seconds, then look at the log's last index."""

    log: LastIndex
    interval: float

    def wait(self, position: int, timeout: float, stopping: Stopping) -> bool:
        _sleep(min(self.interval, timeout), stopping)
        return not stopping.is_set() and self.log.last_index() > position


class Notifications(Protocol):
    """A push source: ``wait(timeout)`` returns True when a notification arrived within ``timeout``
    seconds (what it carries does not matter: the loop reads the log itself)."""

    def wait(self, timeout: float) -> bool: ...


@dataclass
class NotifiedWait:
    """Wait on ``notifications``, and re-poll the log every ``watchdog_s`` seconds in case one was lost.
    ``recovered`` counts the times the watchdog found events that no notification announced."""

    log: LastIndex
    notifications: Notifications
    watchdog_s: float
    recovered: int = 0
    _next_poll: float = field(default=0.0, repr=False)

    def wait(self, position: int, timeout: float, stopping: Stopping) -> bool:
        deadline = time.monotonic() + timeout
        if not self._next_poll:
            self._next_poll = time.monotonic() + self.watchdog_s
        while not stopping.is_set():
            now = time.monotonic()
            if now >= self._next_poll:
                self._next_poll = now + self.watchdog_s
                if self.log.last_index() > position:
                    self.recovered += 1
                    return True
            if now >= deadline:
                return False
            if self.notifications.wait(min(SLICE_S, deadline - now, max(self._next_poll - now, 0.0))):
                return True
        return False


class QueueNotifications:
    """An in-process notification source (one process's writers notify its worker thread); also what
    the tests use to lose notifications on purpose. ``notify()`` may be called from any thread."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def notify(self) -> None:
        self._event.set()

    def wait(self, timeout: float) -> bool:
        # Clear only a notification we saw: clearing after a timeout could eat one that arrived
        # between the timeout and the clear.
        if self._event.wait(timeout):
            self._event.clear()
            return True
        return False


@dataclass
class Target:
    """One projection as the loop drives it: its position, and ``advance(target)``, which applies
    the events up to ``target`` (at most one batch: the loop passes ``position + batch_size``) and
    returns how many this process applied (0 when another process had applied them first)."""

    name: str
    batch_size: int
    position: Callable[[], int]
    advance: Callable[[int], int]


class Heartbeat(Protocol):
    """Where a worker says it is alive (see :mod:`pmem.adapters.readmodels.heartbeat`)."""

    def beat(self, name: str, position: int, state: str = "running") -> None: ...


@dataclass
class Follower:
    """Drives ``targets`` over ``log`` until stopped; ``report`` is told of every committed batch."""

    log: LastIndex
    targets: list[Target]
    wait: WaitForEvents
    heartbeat: Heartbeat
    heartbeat_s: float = 1.0
    report: Callable[[dict[str, Any]], None] = lambda _: None
    applied: dict[str, int] = field(default_factory=dict)

    def run(self, stopping: Stopping) -> dict[str, int]:
        """Follow the log until ``stopping`` is set; return the events this process applied, per target."""
        self.applied = {t.name: 0 for t in self.targets}
        last_beat = 0.0
        try:
            while not stopping.is_set():
                worked = self.step(stopping)
                if time.monotonic() - last_beat >= self.heartbeat_s:
                    for t in self.targets:
                        self.heartbeat.beat(t.name, t.position())
                    last_beat = time.monotonic()
                if not worked and not stopping.is_set():
                    behind = min(t.position() for t in self.targets)
                    self.wait.wait(behind, max(self.heartbeat_s - (time.monotonic() - last_beat), 0.0), stopping)
        finally:
            for t in self.targets:
                self.heartbeat.beat(t.name, t.position(), "stopped")
        return self.applied

    def step(self, stopping: Stopping) -> bool:
        """One batch for each target that is behind; False when every target was caught up."""
        last = self.log.last_index()
        worked = False
        for t in self.targets:
            if stopping.is_set():
                break
            start = t.position()
            if start >= last:
                continue
            self.applied[t.name] += t.advance(min(start + t.batch_size, last))
            position = t.position()
            self.report({"projection": t.name, "position": position, "lag": max(last - position, 0)})
            # a projection that did not move (stopped before an event it cannot apply) is no work done
            worked = worked or position > start
        return worked
