"""The follower loop and its wait strategies, on a small in-memory log (no I/O)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from pmem.adapters.readmodels.follower import Follower, NotifiedWait, PollingWait, QueueNotifications, Target


@dataclass
class MemoryLog:
    last: int = 0

    def last_index(self) -> int:
        return self.last


@dataclass
class MemoryProjection:
    """Applies events by moving its position, and remembers every event index it applied."""

    seen: list[int] = field(default_factory=list)
    on_batch: object = None

    def position(self) -> int:
        return self.seen[-1] if self.seen else 0

    def advance(self, target: int) -> int:
        start = self.position()
        self.seen.extend(range(start + 1, target + 1))
        if callable(self.on_batch):
            self.on_batch()
        return target - start


@dataclass
class MemoryHeartbeat:
    beats: list[tuple[str, int, str]] = field(default_factory=list)

    def beat(self, name: str, position: int, state: str = "running") -> None:
        self.beats.append((name, position, state))


class LossyNotifications(QueueNotifications):
    """Drops every notification: only the watchdog can notice new events."""

    def notify(self) -> None:
        pass


def follower(log: MemoryLog, p: MemoryProjection, wait: object, batch: int = 10,
             heartbeat_s: float = 0.05) -> tuple[Follower, MemoryHeartbeat]:
    hb = MemoryHeartbeat()
    target = Target("p", batch, p.position, p.advance)
    return Follower(log, [target], wait, hb, heartbeat_s=heartbeat_s), hb  # type: ignore[arg-type]


def run_in_thread(f: Follower, stopping: threading.Event) -> threading.Thread:
    t = threading.Thread(target=f.run, args=(stopping,), daemon=True)
    t.start()
    return t


def eventually(cond: object, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if callable(cond) and cond():
            return True
        time.sleep(0.01)
    return False


def test_the_follower_applies_the_log_in_batches_each_event_once_in_order() -> None:
    log, p = MemoryLog(95), MemoryProjection()
    f, hb = follower(log, p, PollingWait(log, 0.01))
    stopping = threading.Event()
    t = run_in_thread(f, stopping)
    assert eventually(lambda: p.position() == 95)
    log.last = 130
    assert eventually(lambda: p.position() == 130)
    stopping.set()
    t.join(5)
    assert p.seen == list(range(1, 131))
    assert f.applied == {"p": 130}
    assert hb.beats[-1] == ("p", 130, "stopped")


def test_a_stop_request_during_a_batch_lets_that_batch_finish_and_starts_no_other() -> None:
    log = MemoryLog(100)
    stopping = threading.Event()
    p = MemoryProjection(on_batch=stopping.set)
    f, hb = follower(log, p, PollingWait(log, 0.01))
    f.run(stopping)
    assert p.seen == list(range(1, 11))
    assert hb.beats[-1] == ("p", 10, "stopped")


def test_a_polling_wait_returns_at_once_when_asked_to_stop() -> None:
    stopping = threading.Event()
    stopping.set()
    t0 = time.monotonic()
    assert PollingWait(MemoryLog(5), 30.0).wait(0, 30.0, stopping) is False
    assert time.monotonic() - t0 < 1.0


def test_a_notification_wakes_the_wait_before_the_watchdog_would() -> None:
    log, source = MemoryLog(), QueueNotifications()
    wait = NotifiedWait(log, source, watchdog_s=60.0)
    threading.Timer(0.05, source.notify).start()
    assert wait.wait(0, 30.0, threading.Event()) is True
    assert wait.recovered == 0


def test_the_watchdog_finds_events_whose_notification_was_lost() -> None:
    log, p = MemoryLog(), MemoryProjection()
    source = LossyNotifications()
    wait = NotifiedWait(log, source, watchdog_s=0.1)
    f, _ = follower(log, p, wait, heartbeat_s=60.0)  # the loop's own re-read comes only after a minute
    stopping = threading.Event()
    t = run_in_thread(f, stopping)
    log.last = 25
    source.notify()  # lost
    assert eventually(lambda: p.position() == 25)
    stopping.set()
    t.join(5)
    assert wait.recovered >= 1
    assert p.seen == list(range(1, 26))


def test_without_new_events_the_watchdog_reports_nothing() -> None:
    wait = NotifiedWait(MemoryLog(3), LossyNotifications(), watchdog_s=0.02)
    assert wait.wait(3, 0.2, threading.Event()) is False
    assert wait.recovered == 0


def test_a_projection_stopped_before_an_event_it_cannot_apply_does_not_keep_the_follower_busy() -> None:
    """A projection that cannot move (it stopped before an event whose namespace cannot be read:
    readmodels.screening) makes no work: the follower waits for new events instead of spinning."""
    p = MemoryProjection()
    stuck = MemoryProjection()
    stuck.advance = lambda target: 0  # type: ignore[method-assign]
    f, _ = follower(MemoryLog(last=5), stuck, PollingWait(MemoryLog(last=5), 0.01))
    f.applied = {"p": 0}
    assert f.step(threading.Event()) is False
    g, _ = follower(MemoryLog(last=5), p, PollingWait(MemoryLog(last=5), 0.01))
    g.applied = {"p": 0}
    assert g.step(threading.Event()) is True and p.position() == 5
