"""The graph projection on real SQLite files and PostgreSQL: positioned by event index, rebuildable, readable as_of."""

from __future__ import annotations

from typing import Any

import orjson

import pmem
from pmem.adapters.readmodels.graph_projection import TABLE, GraphProjection
from pmem.adapters.readmodels.lexical_projection import LexicalProjection
from pmem.adapters.readmodels.tracked_projection import rebuild_together
from tests.conftest import Backend
from tests.integration.test_projection import NAMESPACES, write_log


def facts_of(store: pmem.Store, ns: str, as_of: int | None) -> set[tuple[str, str, str]]:
    return {(f.key, f.value, f.status) for f in store.graph(as_of=as_of, namespace=ns).facts()}


def heads_of(store: pmem.Store, ns: str, as_of: int | None) -> set[tuple[str, str, str]]:
    """The reference: the frontier's heads (its own projection, tested against replay)."""
    return {(c.key, str(c.value), c.status) for c in store.frontier(as_of=as_of, namespace=ns)}


def rows(conn: Any) -> list[tuple[object, ...]]:
    return conn.execute(f"SELECT * FROM {TABLE} ORDER BY cell_id, opened_at").fetchall()


def test_the_graph_as_of_every_event_index_holds_exactly_the_heads_of_that_moment(db: str) -> None:
    with pmem.open(db) as store:
        write_log(store, 150, seed=3)
        last = store.last_index()
        for n in range(0, last + 1, 7):
            for ns in NAMESPACES:
                assert facts_of(store, ns, n) == heads_of(store, ns, n), (n, ns)


def test_catching_up_in_small_batches_equals_a_rebuild_and_a_fresh_projection(backend: Backend, db: str) -> None:
    with pmem.open(db) as store:
        store.projections["graph"].batch_size = 13
        for seed in range(3):
            write_log(store, 60, seed=seed)
            store.graph()  # each read catches up the new events only
        live = rows(store.projection_db)
        fresh = GraphProjection(backend.fresh_projection_db(), store.log_store)
        fresh.catch_up()
        assert rows(fresh.conn) == live
        assert store.rebuild("graph")["events"] == store.last_index()
        assert rows(store.projection_db) == live


def test_a_rollback_reopens_the_earlier_value_in_the_graph(store: pmem.Store) -> None:
    store.accept("our_mutual_friend.author", "Charles Darwin")
    store.accept("our_mutual_friend.author", "Charles Dickens")
    assert store.graph().entities["our_mutual_friend"].facts[0].value == "Charles Dickens"
    store.revoke("our_mutual_friend.author")
    assert store.graph().entities["our_mutual_friend"].facts[0].value == "Charles Darwin"
    assert store.graph(as_of=2).entities["our_mutual_friend"].facts[0].value == "Charles Dickens"


def test_a_declared_prerequisite_is_an_event_and_a_revoke_withdraws_it(store: pmem.Store) -> None:
    r = store.declare_prerequisite("visa.status", "trip.date", source="planner")
    assert r.applied and store.graph().requires("trip") == {"visa"}
    store.revoke(r.key)
    assert store.graph().requires("trip") == set()
    assert store.graph(as_of=r.event_index).requires("trip") == {"visa"}


def test_stats_and_rebuild_include_the_graph_projection(store: pmem.Store) -> None:
    store.accept("a.b", "c")
    assert store.rebuild("graph")["events"] == 1
    assert store.stats()["projections"]["graph"] == {"position": 1, "lag": 0}


def test_graph_facts_by_key_are_the_graphs_facts_of_each_entity_as_of_every_index(db: str) -> None:
    """``Store.graph_facts`` (multi-hop reading's lookup by key) against the graph it stands for, on both
    backends: every subject at every index, a subject that is a prefix of another, a key with no dot,
    a forgotten cell."""
    with pmem.open(db) as store:
        store.apply([{"op": "accept", "key": k, "value": v} for k, v in (
            ("ab.x", "Ab X"), ("ab_c.y", "1"), ("ab", "plain"), ("abc.z", "2"), ("ab.w", "Ab W"))])
        store.accept("ab.x", "Ab X2")
        store.forget("ab.w")
        write_log(store, 40, seed=5)
        for n in range(0, store.last_index() + 1, 3):
            for ns in NAMESPACES:
                g = store.graph(as_of=n, namespace=ns)
                subjects = [*g.entities, "ab", "nobody"]
                got = store.graph_facts(subjects, as_of=n, namespace=ns)
                for s in subjects:
                    want = g.entities[s].facts if s in g.entities else []
                    assert {(f.key, f.value) for f in got[s]} == {(f.key, f.value) for f in want}, (n, ns, s)
        now = store.graph_facts(["ab"])["ab"]
        assert {(f.key, f.value) for f in now} == {("ab.x", "Ab X2"), ("ab", "plain")}


def lexical_rows(conn: Any) -> list[list[tuple[object, ...]]]:
    docs = ("SELECT version_id, cell, vid, event_index, namespace, keywords, value, evidence FROM pmem_lex_fts"
            if "pmem_lex_fts" in conn.names() else
            "SELECT version_id, cell, vid, event_index, namespace, doc::text FROM pmem_lex_docs")
    return [conn.execute(sql).fetchall() for sql in (
        "SELECT * FROM pmem_lex_versions ORDER BY version_id", "SELECT * FROM pmem_lex_terms ORDER BY term",
        f"SELECT * FROM ({docs}) AS d ORDER BY version_id, event_index")]


def test_graph_and_full_text_rebuilt_in_one_pass_equal_fresh_projections_also_past_an_unreadable_event(
        backend: Backend, db: str) -> None:
    """rebuild_together reads each batch once for both; a batch with an event that cannot be read ends
    the shared pass and each projection goes on alone (stopping that namespace), as a fresh one does."""
    table, column = ("pmem_events", "notification_id") if db.startswith("postgresql") else ("stored_events", "rowid")
    with pmem.open(db) as store:
        write_log(store, 240, seed=7)
        bad = store.last_index() // 2
        (state,) = store.projection_db.execute(f"SELECT state FROM {table} WHERE {column} = ?", (bad,)).fetchone()
        namespace = orjson.loads(bytes(state))["namespace"]
        store.projection_db.execute(f"UPDATE {table} SET state = ? WHERE {column} = ?",
                                    (orjson.dumps({"namespace": namespace, "class_version": 99}), bad))
        graph, lexical = store.projections["graph"], store.projections["lexical"]
        fresh = [cls(backend.fresh_projection_db(), store.log_store) for cls in (GraphProjection, LexicalProjection)]
        for projection in fresh:
            projection.batch_size = 17
            projection.catch_up()
        for projection in (graph, lexical):
            projection.rebuild_batch_size = 40  # several shared batches before the unreadable one
        assert rebuild_together([graph, lexical]) < store.last_index()  # that namespace's later events are left
        assert rows(store.projection_db) == rows(fresh[0].conn)
        assert lexical_rows(store.projection_db) == lexical_rows(fresh[1].conn)
        for mine, theirs in zip((graph, lexical), fresh, strict=True):
            assert [(s.namespace, s.index) for s in mine.stops().values()] == [(namespace, bad)]
            assert mine.stops() == theirs.stops() and mine.position() == theirs.position() == store.last_index()
        assert graph.batch_size == 2_000 and not graph._whole  # the catch-up settings come back
