"""``pmem rebuild`` and ``pmem stats`` as a user runs them (SPEC §9)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.test_cli import error, ok, pmem

OPS = [
    {"op": "accept", "key": "budget", "value": "$30k", "source": "email"},
    {"op": "accept", "key": "budget", "value": "$50k"},
    {"op": "revoke", "key": "budget"},
    {"op": "accept", "key": "room", "value": "A"},
    {"op": "contest", "key": "room", "value": "B"},
    {"op": "contest", "key": "nothing", "value": "x"},  # a noop: the cell has no incumbent
]
GET_AS_OF = ("get", "budget", "--as-of", "2", "--disclose", "history,alternatives,support")


def write(db: Path) -> None:
    ok(db, "apply", "-", stdin=b"".join(json.dumps(d).encode() + b"\n" for d in OPS))


def test_stats_on_a_new_store_counts_nothing(db_path: Path) -> None:
    assert ok(db_path, "stats") == [{"events": 0, "cells": 0, "namespaces": 0,
                                     "projections": {"frontier": {"position": 0, "lag": 0, "versions": 0},
                                                     "graph": {"position": 0, "lag": 0},
                                                     "vectors": {"position": 0, "lag": 0},
                                                     "lexical": {"position": 0, "lag": 0}},
                                     "key_edition": 2}]


def test_stats_shows_the_lag_until_a_read_catches_the_projection_up(db_path: Path) -> None:
    write(db_path)
    (before,) = ok(db_path, "stats")
    # The log side counts cells at once; the frontier's versions wait until a read catches it up.
    assert before == {"events": 6, "cells": 3, "namespaces": 1,
                      "projections": {"frontier": {"position": 0, "lag": 6, "versions": 0},
                                      "graph": {"position": 0, "lag": 6},
                                      "vectors": {"position": 0, "lag": 6}, "lexical": {"position": 0, "lag": 6}},
                      "key_edition": 2}
    ok(db_path, "frontier")
    (after,) = ok(db_path, "stats")
    assert after == {"events": 6, "cells": 3, "namespaces": 1,
                     "projections": {"frontier": {"position": 6, "lag": 0, "versions": 4},
                                     "graph": {"position": 0, "lag": 6},
                                     "vectors": {"position": 0, "lag": 6}, "lexical": {"position": 0, "lag": 6}},
                     "key_edition": 2}
    ok(db_path, "search", "budget")  # search catches the vector and lexical projections up
    assert ok(db_path, "stats")[0]["projections"]["vectors"] == {"position": 6, "lag": 0}
    assert ok(db_path, "stats")[0]["projections"]["lexical"] == {"position": 6, "lag": 0}


def test_rebuild_replays_every_event_and_reads_do_not_change(db_path: Path) -> None:
    write(db_path)
    reads = [ok(db_path, "frontier"), ok(db_path, "history", "budget"), ok(db_path, *GET_AS_OF)]
    (r,) = ok(db_path, "rebuild")
    assert set(r) == {"events", "seconds"} and r["events"] == 6 and r["seconds"] >= 0
    (r,) = ok(db_path, "rebuild", "--projection", "frontier")
    assert r["events"] == 6
    assert ok(db_path, "stats")[0]["projections"]["frontier"] == {"position": 6, "lag": 0, "versions": 4}
    assert ok(db_path, "stats")[0]["projections"]["graph"] == {"position": 6, "lag": 0}
    assert reads == [ok(db_path, "frontier"), ok(db_path, "history", "budget"), ok(db_path, *GET_AS_OF)]


def test_rebuild_of_an_unknown_projection_is_a_usage_error(db_path: Path) -> None:
    r = pmem(db_path, "rebuild", "--projection", "nonsense")
    assert r.returncode == 2
    err = error(r)
    assert err["error"] == "usage" and "unknown projection 'nonsense'" in err["detail"]
    assert "frontier, graph, vectors, lexical or all" in err["detail"]


def test_rebuild_of_the_vectors_replays_them_and_rewrites_the_deleted_index_file(db_path: Path) -> None:
    write(db_path)
    before = ok(db_path, "search", "budget")
    cache = db_path.with_name(db_path.name + ".vec-flat")
    cache.unlink()
    (r,) = ok(db_path, "rebuild", "--projection", "vectors")
    assert r["events"] == 6 and cache.exists()
    assert ok(db_path, "stats")[0]["projections"]["vectors"] == {"position": 6, "lag": 0}
    (r,) = ok(db_path, "rebuild")  # all: frontier and vectors replay the same 6 events
    assert r["events"] == 6
    assert ok(db_path, "search", "budget") == before


def test_rebuild_and_stats_list_in_help(db_path: Path) -> None:
    out = pmem(db_path, "--help").stdout.decode()
    assert "rebuild" in out and "stats" in out
