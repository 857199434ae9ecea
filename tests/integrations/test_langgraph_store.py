"""``PMemStore`` with the real ``langgraph`` package: the BaseStore behaviour (get, put, delete, search,
filter, list_namespaces, async) on real stores of both backends, and a compiled LangGraph graph whose
node writes and reads memories through it."""

from __future__ import annotations

import asyncio
import json
import operator
from collections.abc import Iterator
from typing import Annotated, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore, InvalidNamespaceError

import pmem
from pmem.integrations.langgraph import PMemStore, cell_key, label


@pytest.fixture
def lg(db: str) -> Iterator[PMemStore]:
    with pmem.open(db, embedder="hashing") as store:
        yield PMemStore(store)


def test_an_item_is_one_cell_under_a_dotted_key_holding_its_json(lg: PMemStore) -> None:
    lg.put(("users", "alice"), "home", {"city": "Lisbon"})
    item = lg.get(("users", "alice"), "home")
    assert item is not None and (item.namespace, item.key, item.value) == (("users", "alice"), "home",
                                                                           {"city": "Lisbon"})
    cell = lg.store.get("users.alice.home")
    stored = json.loads(cell.value or "")
    assert stored["value"] == {"city": "Lisbon"} and stored["namespace"] == ["users", "alice"]
    assert lg.get(("users", "alice"), "nothing") is None and lg.get(("users", "bob"), "home") is None


def test_labels_that_are_not_key_parts_get_a_hash_so_none_collide() -> None:
    assert cell_key(("users", "alice"), "home") == "users.alice.home"
    assert label("Alice") != label("alice") == "alice"
    assert label("Alice").startswith("alice_") and label("a b") != label("a_b") and label("é").isascii()
    assert cell_key(("users",)) == "users." and cell_key(()) == ""


def test_an_update_supersedes_and_keeps_created_at(lg: PMemStore) -> None:
    lg.put(("users", "alice"), "home", {"city": "Lisbon"})
    first = lg.get(("users", "alice"), "home")
    after_first = lg.store.last_index()
    lg.put(("users", "alice"), "home", {"city": "Porto"})
    second = lg.get(("users", "alice"), "home")
    assert first and second and second.value == {"city": "Porto"}
    assert second.created_at == first.created_at and second.updated_at > first.updated_at
    old = lg.as_of(("users", "alice"), "home", after_first)
    assert old is not None and old.value == {"city": "Lisbon"}
    assert [v.status for v in lg.history(("users", "alice"), "home").versions] == ["superseded", "active"]


def test_a_delete_revokes_every_version_so_history_and_time_travel_stay(lg: PMemStore) -> None:
    ns = ("users", "alice")
    for city in ("Lisbon", "Porto", "Faro"):
        lg.put(ns, "home", {"city": city})
    before = lg.store.last_index()
    lg.delete(ns, "home")
    assert lg.get(ns, "home") is None and lg.store.get("users.alice.home").status == "empty"
    assert [v.status for v in lg.history(ns, "home").versions] == ["revoked"] * 3
    old = lg.as_of(ns, "home", before)
    assert old is not None and old.value == {"city": "Faro"}
    lg.put(ns, "home", {"city": "Braga"})  # a put after a delete starts afresh
    again = lg.get(ns, "home")
    assert again is not None and again.value == {"city": "Braga"} and again.created_at > old.created_at


def test_a_batch_runs_in_order_with_a_put_then_a_delete_of_the_same_item(lg: PMemStore) -> None:
    from langgraph.store.base import GetOp, PutOp
    ns = ("docs",)
    out = lg.batch([PutOp(ns, "a", {"n": 1}), PutOp(ns, "b", {"n": 2}), GetOp(ns, "a"),
                    PutOp(ns, "a", None), GetOp(ns, "a"), GetOp(ns, "b")])
    assert out[0] is None and out[1] is None and out[3] is None and out[4] is None
    assert out[2].value == {"n": 1} and out[5].value == {"n": 2}  # type: ignore[union-attr]


def seed(lg: PMemStore) -> None:
    lg.put(("users", "alice", "memories"), "m1", {"text": "Alice runs a 5K in 25:50", "kind": "sport", "n": 3})
    lg.put(("users", "alice", "memories"), "m2", {"text": "Alice lives in Lisbon", "kind": "place", "n": 7})
    lg.put(("users", "alice", "prefs"), "p1", {"text": "Alice likes green tea", "kind": "food", "n": 1})
    lg.put(("users", "bob", "memories"), "m1", {"text": "Bob lives in Porto", "kind": "place", "n": 5})


def test_search_with_a_query_is_hybrid_and_stays_inside_the_prefix(lg: PMemStore) -> None:
    seed(lg)
    found = lg.search(("users", "alice"), query="where does Alice live? Lisbon")
    assert found and found[0].key == "m2" and found[0].score is not None
    assert all(i.namespace[:2] == ("users", "alice") for i in found)
    assert {i.key for i in lg.search(("users", "bob"), query="lives")} == {"m1"}


def test_search_filters_on_value_fields_with_operators(lg: PMemStore) -> None:
    seed(lg)
    assert {(i.namespace[1], i.key) for i in lg.search(("users",), filter={"kind": "place"})} == {
        ("alice", "m2"), ("bob", "m1")}
    assert {i.key for i in lg.search(("users", "alice"), filter={"n": {"$gte": 3}})} == {"m1", "m2"}
    assert {i.key for i in lg.search(("users", "alice"), filter={"kind": {"$ne": "place"}})} == {"m1", "p1"}
    assert [i.key for i in lg.search(("users", "alice"), query="Lisbon", filter={"kind": "sport"})] == ["m1"]
    everything = lg.search((), limit=10)
    assert len(everything) == 4 and [i.key for i in lg.search((), limit=2, offset=3)] == [everything[3].key]
    with pytest.raises(ValueError, match=r"\$near"):
        lg.search(("users",), filter={"n": {"$near": 1}})


def test_list_namespaces_honours_prefix_suffix_and_max_depth(lg: PMemStore) -> None:
    seed(lg)
    lg.put(("users", "alice", "memories"), "m3", {"text": "x"})  # one namespace, many items: listed once
    assert lg.list_namespaces() == [("users", "alice", "memories"), ("users", "alice", "prefs"),
                                     ("users", "bob", "memories")]
    assert lg.list_namespaces(prefix=("users", "alice")) == [("users", "alice", "memories"),
                                                             ("users", "alice", "prefs")]
    assert lg.list_namespaces(suffix=("memories",)) == [("users", "alice", "memories"), ("users", "bob", "memories")]
    assert lg.list_namespaces(prefix=("users", "*"), suffix=("prefs",)) == [("users", "alice", "prefs")]
    assert lg.list_namespaces(max_depth=2) == [("users", "alice"), ("users", "bob")]
    assert lg.list_namespaces(limit=1, offset=1) == [("users", "alice", "prefs")]
    lg.delete(("users", "alice", "prefs"), "p1")
    assert ("users", "alice", "prefs") not in lg.list_namespaces()


def test_cells_written_by_others_in_the_namespace_are_not_items(lg: PMemStore) -> None:
    lg.store.accept("users.carol.note", "plain text")
    seed(lg)
    assert ("users", "carol") not in lg.list_namespaces(max_depth=2)
    assert all(i.key != "note" for i in lg.search(("users",), limit=20))


def test_the_async_api_runs_the_same_operations(lg: PMemStore) -> None:
    async def run() -> None:
        await lg.aput(("users", "alice"), "home", {"city": "Lisbon"})
        item = await lg.aget(("users", "alice"), "home")
        assert item is not None and item.value == {"city": "Lisbon"}
        assert [i.key for i in await lg.asearch(("users",), query="Lisbon")] == ["home"]
        assert await lg.alist_namespaces() == [("users", "alice")]
        await lg.adelete(("users", "alice"), "home")
        assert await lg.aget(("users", "alice"), "home") is None

    asyncio.run(run())


def test_langgraph_rules_on_namespaces_still_hold(lg: PMemStore) -> None:
    with pytest.raises(InvalidNamespaceError):
        lg.put(("users.alice",), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        lg.put((), "k", {"v": 1})


def test_a_store_namespace_keeps_items_apart_and_writes_carry_the_source(db: str) -> None:
    with pmem.open(db, embedder="hashing") as store:
        a, b = PMemStore(store, namespace="team-a"), PMemStore(store, namespace="team-b", source="bot")
        a.put(("notes",), "n", {"v": 1})
        assert b.get(("notes",), "n") is None and b.list_namespaces() == []
        b.put(("notes",), "n", {"v": 2})
        assert a.get(("notes",), "n").value == {"v": 1}  # type: ignore[union-attr]
        assert store.history("notes.n", namespace="team-b").versions[0].sources == ("bot",)


class Chat(TypedDict):
    user: str
    said: str
    answers: Annotated[list[str], operator.add]


def remember_and_recall(state: Chat, *, store: BaseStore) -> dict[str, list[str]]:
    """A node with no model: stores what the user said, then answers from what it finds."""
    ns = ("users", state["user"], "memories")
    store.put(ns, f"m{len(store.search(ns, limit=100))}", {"text": state["said"]})
    found = store.search(ns, query=state["said"], limit=1)
    return {"answers": [found[0].value["text"] if found else "nothing"]}


def test_a_compiled_graph_writes_and_reads_memories_through_the_store(lg: PMemStore) -> None:
    builder = StateGraph(Chat)
    builder.add_node("memory", remember_and_recall)
    builder.add_edge(START, "memory")
    builder.add_edge("memory", END)
    graph = builder.compile(store=lg)
    out = graph.invoke({"user": "alice", "said": "My 5K PB is 25:50", "answers": []})
    assert out["answers"] == ["My 5K PB is 25:50"]
    graph.invoke({"user": "alice", "said": "I moved to Lisbon", "answers": []})
    assert {i.value["text"] for i in lg.search(("users", "alice", "memories"))} == {"My 5K PB is 25:50",
                                                                                     "I moved to Lisbon"}
    assert lg.list_namespaces() == [("users", "alice", "memories")]
