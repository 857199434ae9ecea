"""The LangGraph store and the Mem0-shaped door on a remote store: ``pmem.connect`` to a real ``pmem serve``
app under uvicorn, over real HTTP with a token, on SQLite. What they write is read back from the local
store of the same file, so the two doors and the server agree on the cells."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import pmem
from pmem.integrations.langgraph import PMemStore
from pmem.integrations.mem0 import Memory
from tests.contract.conftest import SETTINGS, Served, uvicorn_serving


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("remote")
    mp = pytest.MonkeyPatch()
    mp.setenv("PMEM_CACHE_DIR", str(tmp / "cache"))
    db = str(Path(tmp) / "mem.db")
    try:
        with pmem.open(db, **SETTINGS) as admin, uvicorn_serving(db) as url:
            yield Served(db, url, admin)
    finally:
        mp.undo()


def test_the_langgraph_store_over_a_remote_store(served: Served) -> None:
    with pmem.connect(served.url, served.token("lg"), namespace="lg") as remote:
        lg = PMemStore(remote)
        lg.put(("users", "alice"), "home", {"city": "Lisbon"})
        lg.put(("users", "alice"), "home", {"city": "Porto"})
        lg.put(("users", "bob"), "home", {"city": "Faro"})
        assert lg.get(("users", "alice"), "home").value == {"city": "Porto"}  # type: ignore[union-attr]
        assert [i.key for i in lg.search(("users", "alice"), query="Porto")] == ["home"]
        assert lg.list_namespaces(max_depth=2) == [("users", "alice"), ("users", "bob")]
        before = remote.last_index()
        lg.delete(("users", "alice"), "home")
        assert lg.get(("users", "alice"), "home") is None
        assert lg.as_of(("users", "alice"), "home", before).value == {"city": "Porto"}  # type: ignore[union-attr]
        assert [v.status for v in lg.history(("users", "alice"), "home").versions] == ["revoked", "revoked"]
    local = PMemStore(served.admin, namespace="lg")
    assert local.get(("users", "bob"), "home").value == {"city": "Faro"}  # type: ignore[union-attr]
    assert served.admin.history("users.bob.home", namespace="lg").versions[0].sources == ("contract",)


def test_the_mem0_door_over_a_remote_store(served: Served) -> None:
    with Memory(db=served.url, token=served.token("alice", "mem0")) as mem:
        assert mem.add("My 5K PB is now 27:12.", user_id="alice", metadata={"c": 1})["results"][0]["event"] == "ADD"
        (r,) = mem.add("My 5K PB is now 25:50.", user_id="alice")["results"]
        assert (r["event"], r["previous_memory"]) == ("UPDATE", "5k_pb: 27:12")
        found = mem.search("5K PB", user_id="alice")["results"]
        assert [(f["memory"], f["metadata"]) for f in found] == [("5k_pb: 25:50", {"c": 1})]
        assert [h["new_memory"] for h in mem.history("alice/5k_pb")] == ["27:12", "25:50"]
        mem.reset()
        assert mem.get_all(user_id="alice") == {"results": []}
        with pytest.raises(pmem.Forbidden):
            mem.add("My 5K PB is now 20:00.", user_id="bob")  # the token covers alice (and the door's cells)
    assert served.admin.get("5k_pb", namespace="alice").status == "empty"
