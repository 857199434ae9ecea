"""``pmem.integrations.mem0.Memory``: every method of the Mem0-shaped door on real stores of both
backends, with P-Mem's offline template extractor (the LLM one is covered by the example's recorded run)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import pmem
from pmem.integrations.mem0 import Memory


@pytest.fixture
def mem(db: str) -> Iterator[Memory]:
    with Memory(db=db, embedder="hashing") as m:
        yield m


def test_add_extracts_facts_and_an_update_supersedes_instead_of_piling_up(mem: Memory) -> None:
    first = mem.add("My 5K PB is now 27:12.", user_id="alice", metadata={"category": "sport"})
    assert first == {"results": [{"id": "alice/5k_pb", "memory": "5k_pb: 27:12", "event": "ADD", "op": "accept",
                                  "event_index": 1}]}
    second = mem.add([{"role": "user", "content": "My 5K PB is now 25:50."},
                      {"role": "assistant", "content": "My 5K PB is now 1:00."}], user_id="alice")
    (r,) = second["results"]  # the assistant's turn is not evidence about the user
    assert (r["event"], r["memory"], r["previous_memory"]) == ("UPDATE", "5k_pb: 25:50", "5k_pb: 27:12")
    assert [m["memory"] for m in mem.get_all(user_id="alice")["results"]] == ["5k_pb: 25:50"]
    assert mem.add("hello there", user_id="alice") == {"results": []}  # nothing said that is a fact


def test_search_returns_mem0_shapes_with_scores_and_the_current_value_only(mem: Memory) -> None:
    mem.add("Thomas Kyd was born in the city of London.", user_id="alice", metadata={"from": "book"})
    mem.add("Thomas Kyd was born in the city of Paris.", user_id="alice")
    mem.add("My favourite colour is now green.", user_id="alice")
    found = mem.search("Where was Thomas Kyd born?", user_id="alice", limit=5)["results"]
    assert found[0]["id"] == "alice/thomas_kyd.birthplace" and found[0]["memory"] == "thomas_kyd.birthplace: Paris"
    assert {"id", "memory", "score", "metadata", "user_id"} <= found[0].keys() and found[0]["score"] > 0
    assert found[0]["metadata"] == {"from": "book"}
    assert not any("London" in f["memory"] for f in found)
    assert len(mem.search("colour", user_id="alice", limit=1)["results"]) == 1
    assert mem.search("Thomas Kyd", user_id="bob")["results"] == []


def test_get_update_history_and_delete_by_id(mem: Memory) -> None:
    mem.add("My home city is now Lisbon.", user_id="alice", metadata={"k": 1})
    got = mem.get("alice/home_city")
    assert got is not None and got["memory"] == "home_city: Lisbon" and got["metadata"] == {"k": 1}
    assert mem.update("alice/home_city", "Porto") == {"message": "Memory updated successfully!"}
    assert mem.get("alice/home_city")["memory"] == "home_city: Porto"  # type: ignore[index]
    history = mem.history("alice/home_city")
    assert [(h["old_memory"], h["new_memory"], h["event"], h["status"]) for h in history] == [
        (None, "Lisbon", "ADD", "superseded"), ("Lisbon", "Porto", "UPDATE", "active")]
    assert mem.delete("alice/home_city") == {"message": "Memory deleted successfully!"}
    assert mem.get("alice/home_city") is None and mem.get_all(user_id="alice") == {"results": []}
    assert [h["is_deleted"] for h in mem.history("alice/home_city")] == [True, True]  # kept, revoked


def test_delete_all_and_reset_empty_users_but_keep_their_history(mem: Memory) -> None:
    mem.add("My home city is now Lisbon.", user_id="alice")
    mem.add("My 5K PB is now 25:50.", user_id="alice")
    mem.add("My home city is now Porto.", user_id="bob")
    mem.add("My dog is now Rex.", user_id="carol")
    assert mem.delete_all(user_id="alice") == {"message": "Memories deleted successfully!"}
    assert mem.get_all(user_id="alice")["results"] == [] and len(mem.get_all(user_id="bob")["results"]) == 1
    mem.reset()
    assert all(mem.get_all(user_id=u)["results"] == [] for u in ("alice", "bob", "carol"))
    assert mem.history("bob/home_city")[0]["new_memory"] == "Porto"


def test_from_config_and_an_open_store_give_the_same_door(db: str) -> None:
    with Memory.from_config({"db": db, "embedder": "hashing"}) as m:
        m.add("My 5K PB is now 25:50.", user_id="alice")
    with pmem.open(db, embedder="hashing") as store:
        door = Memory(store=store)
        assert door.get("alice/5k_pb")["memory"] == "5k_pb: 25:50"  # type: ignore[index]
        assert store.get("5k_pb", namespace="alice").value == "25:50"  # a user is a P-Mem namespace


@pytest.mark.parametrize(("call", "field"), [
    (lambda m: m.add("My 5K PB is now 25:50."), "user_id"),
    (lambda m: m.search("x", user_id=" "), "user_id"),
    (lambda m: m.get("no-slash"), "memory_id"),
    (lambda m: m.update("alice/nothing", "x"), "memory_id"),
    (lambda m: m.add([{"role": "user"}], user_id="a"), "messages"),
    (lambda m: Memory.from_config({"path": "x"}), "db"),
])
def test_bad_input_is_one_line_naming_the_field(mem: Memory, call: object, field: str) -> None:
    with pytest.raises(pmem.InvalidOperation) as e:
        call(mem)  # type: ignore[operator]
    assert e.value.field == field and "\n" not in str(e.value)


def test_the_llm_settings_take_p_mems_form_and_mem0s(monkeypatch: pytest.MonkeyPatch) -> None:
    from pmem.integrations.mem0 import _llm

    monkeypatch.delenv("PMEM_LLM_MODEL", raising=False)
    monkeypatch.delenv("PMEM_LLM_BASE", raising=False)
    ours = _llm({"model": "openai/qwen", "api_base": "http://127.0.0.1:8080/v1", "timeout_s": 900})
    assert (ours.model, ours.api_base, ours.timeout_s) == ("openai/qwen", "http://127.0.0.1:8080/v1", 900.0)
    mem0s = _llm({"provider": "openai", "config": {"model": "gpt-4o-mini", "temperature": 0.1}})
    assert (mem0s.model, mem0s.api_base) == ("openai/gpt-4o-mini", None)
    assert _llm({}) is None


def test_the_llm_extractor_without_a_model_is_a_setup_error(db_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    from pmem.domain.errors import ExtractorNotConfigured

    monkeypatch.delenv("PMEM_LLM_MODEL", raising=False)
    with pytest.raises(ExtractorNotConfigured, match="llm extractor not configured"):
        Memory(db=str(db_path), extractor="llm", embedder="hashing")
