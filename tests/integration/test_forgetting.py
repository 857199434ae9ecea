"""Forgetting (docs/forgetting.md): what a forgotten cell reads as, on both backends, through every
read path; what forget refuses; sealing at rest; a plaintext (pre-sealing) store; the CLI."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

import pmem
from pmem.adapters.eventstore import sealing
from tests.conftest import PMEM_BIN, ROOT

F = "<forgotten>"


def test_a_forgotten_cell_reads_empty_now_and_forgotten_at_every_earlier_index(db: str) -> None:
    with pmem.open(db) as store:
        store.accept("ann.phone", "555-0101", source="crm", text="call me on 555-0101")
        store.contest("ann.phone", "555-0199", source="email")
        store.accept("ann.city", "Oslo")
        (r,) = store.forget("ann.phone")
        assert (r.key, r.op, r.applied, r.head, r.event_index) == ("ann.phone", "forget", True, None, 4)
        assert store.get("ann.phone").status == "empty" and store.get("ann.phone").value is None
        assert store.get("ann.phone", as_of=2).value == F  # the plaintext is gone for every index
        assert store.get("ann.city").value == "Oslo"
        h = store.history("ann.phone")
        assert [(v.value, v.status, v.sources) for v in h.versions] == [
            (F, "forgotten", (F,)), (F, "forgotten", (F,))]
        log = [e for e in store.log() if e["key"] == "ann.phone"]
        assert [e["op"] for e in log] == ["accept", "contest", "forget"]
        assert {(e["value"], e.get("text"), e.get("source")) for e in log[:2]} == {(F, F, F), (F, None, F)}
        assert not store.search("555-0101", 3) or store.search("555-0101", 3)[0].cell.key != "ann.phone"
    with pmem.open(db, reader="replay") as replay:  # the log, folded afresh, agrees
        assert replay.history("ann.phone") == h
        assert replay.get("ann.phone", as_of=2).value == F


def test_a_write_after_a_forget_starts_a_new_life_under_a_new_key(db: str) -> None:
    with pmem.open(db) as store:
        store.accept("k", "old")
        store.forget("k")
        store.accept("k", "new", source="s")
        assert store.get("k").value == "new"
        assert [v.value for v in store.history("k").versions] == [F, "new"]
        assert store.history("k").versions[1].supersedes is None  # the chain of the old life is closed
        assert [e["value"] for e in store.log()] == [F, None, "new"]
        store.rebuild()
        assert [v.value for v in store.history("k").versions] == [F, "new"]
        assert store.forget("k")[0].event_index == 4  # the new life can be forgotten in turn
        assert [e["value"] for e in store.log()] == [F, None, F, None]


def test_forget_by_subject_takes_the_subject_and_its_dotted_keys_only(db: str) -> None:
    with pmem.open(db) as store:
        for key in ("ann", "ann.phone", "ann.city.zip", "anna.phone", "bob.ann", "bob"):
            store.accept(key, f"v-{key}")
        forgotten = store.forget(subject="Ann")
        assert [r.key for r in forgotten] == ["ann", "ann.city.zip", "ann.phone"]
        assert {c.key for c in store.frontier()} == {"anna.phone", "bob.ann", "bob"}
        assert store.forget(subject="ann") == []  # nothing new since: nothing appended
        assert store.forget("never.written") == []
        assert store.forget("ann", namespace="other") == []


def test_forget_refuses_bad_arguments(store: pmem.Store) -> None:
    for kwargs in ({}, {"key": "a", "subject": "b"}, {"key": 5}, {"key": "!!!"}, {"subject": ""}):
        with pytest.raises(pmem.PmemError):
            store.forget(**kwargs)  # type: ignore[arg-type]
    assert store.last_index() == 0


def test_values_texts_and_sources_are_sealed_at_rest_and_read_while_the_key_exists(db: str) -> None:
    with pmem.open(db) as store:
        store.accept("k", "SECRETvalue", source="SECRETsource", text="SECRETtext")
        assert "SECRETvalue" in (store.revise("k", "other", old_value="stale").reason or "")  # a noop's reason
        rows = store.log_store.rows(1, None, 10)
        assert all(b"SECRET" not in bytes(r[4]) for r in rows)
        assert b"_sealed" in bytes(rows[0][4])
        (e,) = store.log()[:1]
        assert (e["value"], e["text"], e["source"]) == ("SECRETvalue", "SECRETtext", "SECRETsource")


def test_a_sealed_blob_moved_to_another_event_does_not_open() -> None:
    key, raw = sealing.new_key(1)
    ring = sealing.Keyring("test", lambda cells: {})
    ring.remember("c" * 32, 1, raw)
    sealed = sealing.seal({"value": "v", "text": None}, "c" * 32, 1, key)
    assert ring.unseal(dict(sealed), "c" * 32, 1)["value"] == "v"
    assert ring.unseal(dict(sealed), "c" * 32, 2)["value"] == F  # another revision
    ring.remember("d" * 32, 1, raw)
    assert ring.unseal(dict(sealed), "d" * 32, 1)["value"] == F  # another cell, even under the same key
    ring.drop(["c" * 32, "d" * 32])


def test_a_store_written_before_sealing_reads_as_before_and_its_forgotten_cells_are_scrubbed(tmp_path: Path) -> None:
    db = tmp_path / "store.sqlite3"
    shutil.copy(ROOT / "tests" / "data" / "edition1_store" / "store.sqlite3", db)
    with pmem.open(db) as store:
        before = store.log()
        victim = before[0]
        old = [bytes(r[4]) for r in store.log_store.rows(1, None, 10_000)]
        assert all(b"_sealed" not in s for s in old)  # plaintext, as that release wrote it
        store.accept("new.key", "NEWSECRET")
        assert b"NEWSECRET" not in bytes(store.log_store.rows(len(old) + 1, None, 1)[0][4])  # new writes are sealed
        store.forget(victim["key"])
        after = store.log()
    others = [e for e in before if e["key"] != victim["key"]]
    assert [e for e in after if e["key"] != victim["key"] and e["event_index"] <= len(old)] == others
    scrubbed = [e for e in after if e["key"] == victim["key"] and e["op"] != "forget"]
    assert scrubbed and all(e["value"] in (F, None) for e in scrubbed)
    raw = db.read_bytes() + (db.with_name(db.name + "-wal").read_bytes() if db.with_name(db.name + "-wal").exists()
                             else b"")
    assert json.dumps(victim["value"]).encode()[1:-1] not in raw


def test_the_cli_forgets_a_key_or_a_subject_and_refuses_neither_or_both(tmp_path: Path) -> None:
    env = {**os.environ, "PMEM_DB": str(tmp_path / "cli.db")}

    def pmem_cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([PMEM_BIN, *args], capture_output=True, text=True, env=env)

    for key in ("ann.phone", "ann.city", "bob.phone"):
        assert pmem_cli("accept", key, "x").returncode == 0
    r = pmem_cli("forget", "bob.phone")
    assert r.returncode == 0 and json.loads(r.stdout)["op"] == "forget"
    r = pmem_cli("forget", "--subject", "ann")
    assert r.returncode == 0
    assert [json.loads(line)["key"] for line in r.stdout.splitlines()] == ["ann.city", "ann.phone"]
    assert pmem_cli("forget").returncode == 2
    assert pmem_cli("forget", "a", "--subject", "b").returncode == 2
    assert json.loads(pmem_cli("get", "ann.city").stdout)["status"] == "empty"


def test_a_key_cached_before_another_process_forgot_does_not_open_old_events(db_path: Path) -> None:
    """SQLite: the forget runs in another process; this one had the key cached."""
    with pmem.open(db_path) as store:
        store.accept("k", "CACHEDsecret")
        assert store.log()[0]["value"] == "CACHEDsecret"
        r = subprocess.run([PMEM_BIN, "forget", "k"], capture_output=True, text=True,
                           env={**os.environ, "PMEM_DB": str(db_path)})
        assert r.returncode == 0, r.stderr
        assert store.log()[0]["value"] == F
        assert store.history("k").versions[0].value == F
        assert store.accept("k", "again").head is not None  # a stale cell and key: the write retries
        assert [e["value"] for e in store.log()] == [F, None, "again"]
    conn = sqlite3.connect(db_path)
    assert conn.execute("SELECT count(*) FROM pmem_keys").fetchone()[0] == 1


def test_the_parallel_rebuild_reads_sealed_and_forgotten_cells_as_the_catch_up_did(db_path: Path) -> None:
    """SQLite: worker processes open sealed fields with the keys they read themselves."""
    with pmem.open(db_path) as store:
        store.apply([{"op": "accept", "key": f"c{i}", "value": f"v{i}", "source": f"s{i}"} for i in range(300)])
        store.apply([{"op": "contest", "key": f"c{i}", "value": f"w{i}", "text": "t"} for i in range(0, 300, 3)])
        for i in range(0, 300, 7):
            store.forget(f"c{i}")
        store.accept("c0", "reborn")
        before = [store.history(f"c{i}") for i in range(300)]
        projection = store.frontier_projection
        projection.rebuild_workers, projection.parallel_from, projection.rebuild_chunk = 2, 0, 60
        sealing.CACHE.clear()  # nothing from the writes: every key is read again
        store.rebuild("frontier")
        assert [store.history(f"c{i}") for i in range(300)] == before
        assert before[7].versions[0].value == F and before[1].versions[0].value == "v1"
        assert [v.value for v in before[0].versions] == [F, F, "reborn"]  # accepted, contested, forgotten


def test_threads_sealing_at_once_never_share_a_nonce() -> None:
    from concurrent.futures import ThreadPoolExecutor

    key, _ = sealing.new_key(1)

    def nonces(n: int) -> list[str]:
        return [sealing.seal({"value": "v"}, "c" * 32, i, key)[sealing.SEALED][2][:16] for i in range(n)]

    with ThreadPoolExecutor(4) as pool:
        found = [x for batch in pool.map(nonces, [5000] * 4) for x in batch]
    assert len(set(found)) == len(found) == 20_000
