"""A projection that meets an event it cannot apply: it stops in that event's namespace
with an error naming the index and the reason, shown by ``stats`` and ``pmem doctor``; the other
namespaces keep answering; once the row reads again, catch-up resumes and every read equals a replay.

Appends are validated, so the bad row is written straight into the log table, as a newer release or
damage would leave it: a real row of namespace ``B`` is changed in place (and later put back). Real
stores on both backends (``backend``); the parallel rebuild, which runs on SQLite files only, on SQLite.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import pmem
from pmem.domain.errors import ProjectionStopped
from tests.conftest import Backend
from tests.e2e.test_cli import error
from tests.e2e.test_cli import pmem as run_pmem

EMBEDDER = "hashing"  # search's projections are what is tested here, not the model


@contextmanager
def log_table(url: str) -> Iterator[Any]:
    """A plain connection to the store's database, its search path on the store's schema (PostgreSQL)."""
    if not url.startswith("postgresql"):
        conn = sqlite3.connect(url)
        try:
            yield conn
            conn.commit()
        finally:
            conn.close()
        return
    import psycopg

    from pmem.adapters.storage.backend import PgBackend

    b = PgBackend.from_url(url)
    with psycopg.connect(**b.conninfo, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{b.schema}"')
        yield conn


def index_column(url: str) -> str:
    return "notification_id" if url.startswith("postgresql") else "rowid"


def events_table(url: str) -> str:
    return "pmem_events" if url.startswith("postgresql") else "stored_events"


def row_at(url: str, index: int) -> tuple[str, bytes]:
    col = index_column(url)
    with log_table(url) as c:
        topic, state = c.execute(f"SELECT topic, state FROM {events_table(url)} WHERE {col}={index}").fetchone()
    return topic, bytes(state)


def set_row(url: str, index: int, topic: str, state: bytes) -> None:
    mark = "%s" if url.startswith("postgresql") else "?"
    with log_table(url) as c:
        c.execute(f"UPDATE {events_table(url)} SET topic={mark}, state={mark} WHERE {index_column(url)}={index}",
                  (topic, state))


def filled(url: str) -> int:
    """Events in namespaces A and B (nothing read, so every projection lags); returns the index of
    the B event that the tests damage: a second value of ``b1``, followed by more of B's events."""
    with pmem.open(url, namespace="A", embedder=EMBEDDER) as s:
        s.apply([{"op": "accept", "key": f"a{i}", "value": f"apple {i}"} for i in range(5)])
        s.accept("b1", "blue one", namespace="B")
        bad = s.accept("b1", "blue two", namespace="B").event_index
        s.accept("b1", "blue three", namespace="B")
        s.accept("b2", "berry", namespace="B")
        s.accept("a0", "apple again")
    return bad


def damage(url: str, index: int, how: str) -> tuple[str, bytes]:
    """Change row ``index`` as ``how`` says; return the row as it was."""
    topic, state = row_at(url, index)
    fields = json.loads(state)
    if how == "topic":
        set_row(url, index, "pmem.cell/Renamed", state)  # a topic a newer release may write
    elif how == "version":
        set_row(url, index, topic, json.dumps({**fields, "class_version": 3}).encode())
    elif how == "type":
        set_row(url, index, topic, json.dumps({**fields, "trust": "high"}).encode())  # not a sealed field
    else:  # unreadable bytes: not even the namespace can be read
        set_row(url, index, topic, b"\xff garbage")
    return topic, state


REASONS = {"topic": "pmem.cell/Renamed", "version": "class version 3", "type": "field 'trust' is str"}


def views(s: pmem.Store, ns: str) -> list[Any]:
    return [(v.key, v.value, v.status, v.alternatives) for v in s.frontier(namespace=ns, disclose=["history"])]


def replayed(url: str, ns: str) -> list[Any]:
    with pmem.open(url, reader="replay", embedder=EMBEDDER) as s:
        return views(s, ns)


@pytest.mark.parametrize("how", ["topic", "version", "type"])
def test_a_bad_row_stops_its_namespace_only_and_reads_resume_once_it_reads(backend: Backend, how: str) -> None:
    url = backend.new_url()
    bad = filled(url)
    original = damage(url, bad, how)
    with pmem.open(url, namespace="A", embedder=EMBEDDER) as s:
        # namespace A answers: get, history, frontier, search, the graph
        assert s.get("a0").value == "apple again"
        assert [v.value for v in s.history("a0").versions] == ["apple 0", "apple again"]
        assert [v[0] for v in views(s, "A")] == [f"a{i}" for i in range(5)]
        assert {r.cell.key for r in s.search("apple", k=10)} == {f"a{i}" for i in range(5)}
        assert s.graph(namespace="A") is not None
        # namespace B: one line naming the index and the reason, for every read from that index on
        for read in (lambda: s.get("b1", namespace="B"), lambda: s.frontier(namespace="B"),
                     lambda: s.history("b2", namespace="B"), lambda: s.search("blue", namespace="B")):
            with pytest.raises(ProjectionStopped) as e:
                read()
            message = str(e.value)
            assert "\n" not in message and f"event {bad} in namespace 'B'" in message
            assert REASONS[how] in message
        # before the bad event, B still reads; the raw log of A is whole, B's shows the row and why
        assert s.get("b1", namespace="B", as_of=bad - 1).value == "blue one"
        assert [e["key"] for e in s.log()] == ["a0", "a1", "a2", "a3", "a4", "a0"]
        (shown,) = [e for e in s.log(namespace="B") if e["event_index"] == bad]
        if how == "topic":  # the others decode: the log shows what is stored
            assert shown == {"event_index": bad, "namespace": "B", "undecodable": shown["undecodable"]}
            assert REASONS[how] in shown["undecodable"]
        stopped = s.stats()["projections"]["frontier"]["stopped"]
        assert stopped == [{"namespace": "B", "index": bad, "reason": stopped[0]["reason"]}]
        assert REASONS[how] in stopped[0]["reason"]
        # writes in A go on, and A reads them
        s.accept("a9", "apple nine")
        assert s.get("a9").value == "apple nine"
        doctor = {c["check"]: c for c in s.doctor()}["stopped"]
        assert not doctor["ok"] and f"frontier at event {bad} in 'B'" in doctor["detail"] and doctor["fix"]
    set_row(url, bad, *original)  # repaired (or: read by a release that knows the row)
    with pmem.open(url, namespace="B", embedder=EMBEDDER) as s:
        assert s.get("b1").value == "blue three"
        assert views(s, "B") == replayed(url, "B")
        assert views(s, "A") == replayed(url, "A")
        assert {r.cell.key for r in s.search("blue berry", k=10)} == {"b1", "b2"}
        assert s.graph() is not None
        assert all("stopped" not in p for p in s.stats()["projections"].values())
        assert {c["check"]: c for c in s.doctor()}["stopped"]["ok"]


def test_a_row_whose_namespace_cannot_be_read_stops_the_projection_before_it(backend: Backend) -> None:
    url = backend.new_url()
    bad = filled(url)
    original = damage(url, bad, "bytes")
    with pmem.open(url, namespace="A", embedder=EMBEDDER) as s:
        assert s.get("a1", as_of=bad - 1).value == "apple 1"  # what comes before it still reads
        for ns in ("A", "B"):
            with pytest.raises(ProjectionStopped, match=f"stopped at event {bad} in every namespace"):
                s.get("a0", namespace=ns)
        stats = s.stats()["projections"]["frontier"]
        assert stats["position"] == bad - 1 and stats["stopped"][0]["namespace"] is None
        for ns in ("A", "B"):  # whose row it is cannot be read: every namespace's log shows it
            (shown,) = [e for e in s.log(namespace=ns) if "undecodable" in e]
            assert shown["event_index"] == bad and shown["namespace"] is None and shown["undecodable"]
    set_row(url, bad, *original)
    with pmem.open(url, namespace="A", embedder=EMBEDDER) as s:
        assert s.get("a0").value == "apple again"
        assert views(s, "B") == replayed(url, "B")


def test_the_cli_reports_a_stopped_namespace_in_one_line(backend: Backend) -> None:
    url = backend.new_url()
    bad = filled(url)
    damage(url, bad, "topic")
    r = run_pmem(url, "--namespace", "B", "get", "b1")
    assert r.returncode == 1
    assert f"event {bad} in namespace 'B'" in error(r)["detail"]
    r = run_pmem(url, "--namespace", "A", "get", "a0")
    assert r.returncode == 0 and b"apple again" in r.stdout
    # writes are decided from the compact cell state written with each event, not from the log's rows,
    # so every cell takes them, the one whose event cannot be read included; B's reads still stop
    for ns, key in (("B", "b1"), ("B", "b2"), ("A", "a0")):
        assert run_pmem(url, "--namespace", ns, "accept", key, "new").returncode == 0
    r = run_pmem(url, "--namespace", "B", "get", "b2")
    assert r.returncode == 1 and f"event {bad} in namespace 'B'" in error(r)["detail"]
    with pmem.open(url, reader="replay", namespace="A") as s:
        assert s.get("a0").value == "new"
        with pytest.raises(pmem.StoreUnavailable, match=f"cannot read event {bad} of cell"):
            s.get("b1", namespace="B")  # the reference fold says so too


def test_a_parallel_rebuild_meeting_a_bad_row_fails_clearly_and_leaves_no_shadow_tables(tmp_path: Path) -> None:
    url = str(tmp_path / "mem.db")
    bad = filled(url)
    with pmem.open(url, embedder=EMBEDDER) as s:
        s.get("a0", namespace="A")  # the frontier is whole before the rebuild
        before = views(s, "A")
    damage(url, bad, "topic")
    with pmem.open(url, embedder=EMBEDDER) as s:
        frontier = s.frontier_projection
        frontier.parallel_from, frontier.rebuild_workers = 1, 2  # worker processes even for a small log
        for workers in (2, 1):
            frontier.rebuild_workers = workers
            with pytest.raises(ProjectionStopped, match=f"stopped at event {bad} in namespace 'B': TopicError"):
                frontier.rebuild()
            with sqlite3.connect(url) as c:
                assert c.execute("SELECT name FROM sqlite_master WHERE name LIKE '%rebuild'").fetchall() == []
        assert views(s, "A") == before  # the old projection stands
    r = run_pmem(url, "rebuild", "--projection", "frontier")
    assert r.returncode == 1 and f"stopped at event {bad}" in error(r)["detail"]
