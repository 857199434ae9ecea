"""``pmem worker`` on PostgreSQL is woken by the log's NOTIFY (pmem.adapters.eventstore.pg_log.PgNotifications), not by
its watchdog; a listening connection that the server drops is replaced. PostgreSQL only: SQLite has no
notifications and polls (pmem.adapters.readmodels.follower.PollingWait, tested in tests/unit/test_follower.py)."""

from __future__ import annotations

import json
import signal
import subprocess
import threading

import psycopg
import pytest

import pmem
from pmem.adapters.eventstore.pg_log import PgNotifications
from pmem.adapters.readmodels.follower import NotifiedWait
from tests.conftest import PMEM_BIN, Backend

TIMEOUT_S = 120


# LISTEN/NOTIFY is PostgreSQL's (SQLite polls): these cases run on that backend only, not as skips.
pytestmark = pytest.mark.parametrize("backend", ["postgres"], indirect=True)


def drain(notes: PgNotifications) -> None:
    """Take every notification already sent (the waits that follow then see only new ones)."""
    while notes.wait(0.2):
        pass


def listener(store: pmem.Store) -> PgNotifications:
    return PgNotifications(store.backend.conninfo, store.log_store.recorder.channel_name, store.backend.label)


def test_an_append_notifies_a_listener_and_a_quiet_log_does_not(backend: Backend) -> None:
    url = backend.new_database_url()  # the channel is per database: other tests' writes would wake it
    with pmem.open(url) as store:
        notes = listener(store)
        try:
            store.accept("k", "v")  # the store's first write (it also creates the tables)
            assert notes.wait(TIMEOUT_S)
            drain(notes)  # what the first write sent; then a quiet log stays quiet
            assert not notes.wait(0.5)
            with pmem.open(url) as other:  # another connection, as another process writes
                other.accept("k", "w")
            assert notes.wait(TIMEOUT_S)
        finally:
            notes.close()


def test_a_dropped_listening_connection_is_replaced_and_reported_as_a_wake_up(backend: Backend) -> None:
    url = backend.new_database_url()  # other tests' writes would wake it before the drop is seen
    with pmem.open(url) as store:
        store.accept("k", "v")
        notes = listener(store)
        try:
            dropped = notes.conn.info.backend_pid
            with psycopg.connect(**store.backend.conninfo, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (dropped,))
            assert notes.wait(TIMEOUT_S)  # the loop re-reads the log: nothing sent meanwhile is lost
            assert notes.conn.info.backend_pid != dropped
            drain(notes)
            store.accept("k", "w")
            assert notes.wait(TIMEOUT_S)
        finally:
            notes.close()


def test_the_watchdog_finds_events_whose_notification_never_came(backend: Backend) -> None:
    """A listener on a channel nobody notifies loses every notification: the re-poll still wakes the wait."""
    with pmem.open(backend.new_url()) as store:
        deaf = PgNotifications(store.backend.conninfo, "pmem_nobody_notifies", store.backend.label)
        try:
            wait = NotifiedWait(store.log_store, deaf, watchdog_s=0.2)
            assert not wait.wait(0, 0.5, threading.Event())  # nothing there: the timeout ends the wait
            store.accept("k", "v")
            assert wait.wait(0, TIMEOUT_S, threading.Event())
            assert wait.recovered == 1
        finally:
            deaf.close()


def test_a_worker_on_postgresql_follows_the_log_by_notification_with_its_watchdog_idle(backend: Backend) -> None:
    """With the watchdog at 10 minutes, only a notification can bring the worker up to date in time."""
    url = backend.new_url()
    with pmem.open(url) as store:
        store.accept("k0", "v")
    proc = subprocess.Popen([PMEM_BIN, "--db", url, "worker", "--projection", "frontier", "--interval", "600"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())  # caught up with what was there
        assert first == {"projection": "frontier", "position": 1, "lag": 0}
        with pmem.open(url) as store:
            store.apply([{"op": "accept", "key": f"k{i}", "value": "v"} for i in range(1, 6)])
        assert json.loads(proc.stdout.readline())["position"] == 6  # woken by the NOTIFY
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=TIMEOUT_S)
    summary = json.loads(out.splitlines()[-1])
    assert proc.returncode == 0, err
    assert summary["wait"] == "notified" and summary["recovered"] == 0, summary
    assert summary["applied"] == {"frontier": 6}
