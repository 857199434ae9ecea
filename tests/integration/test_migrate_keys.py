"""``pmem migrate keys``: a key-edition-1 store moves to edition 2. The cells that the
given spellings name are re-keyed as events (history shows them), spellings that collide on one
edition-1 key are a conflict and left alone, ``as_of`` before the migration reads exactly the old state,
``--dry-run`` changes nothing, a store on edition 2 says so, bad input exits 2.

On a copy of the fixture store written by the previous release (``tests/data/edition1_store``; the
fixture itself is never touched), and on both backends with an edition-1 store made the way that
release left it (``pmem_meta`` saying edition 1).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import pmem
from pmem.adapters.storage.backend import open_backend
from tests.conftest import ROOT, Backend
from tests.e2e.test_cli import error, ok
from tests.e2e.test_cli import pmem as run_pmem

FIXTURE = ROOT / "tests" / "data" / "edition1_store"
OPS = [json.loads(line) for line in (FIXTURE / "ops.jsonl").read_text().splitlines()]
RAW_KEYS = sorted({op["key"] for op in OPS}) + ["gr_e", "caf", "Strasse"]


@pytest.fixture
def old_store(tmp_path: Path) -> Path:
    db = tmp_path / "store.sqlite3"
    shutil.copy(FIXTURE / "store.sqlite3", db)
    return db


def old_state(db: str | Path, as_of: int) -> dict[str, Any]:
    """Every raw key's cell and history, in every namespace, as of ``as_of``."""
    with pmem.open(db) as s:
        return {(ns, k): (s.get(k, as_of=as_of, namespace=ns, disclose=["history", "alternatives"]),
                          s.history(k, as_of=as_of, namespace=ns))
                for ns in ("default", "alice") for k in RAW_KEYS}


def spellings(tmp_path: Path, *lines: str) -> str:
    path = tmp_path / "spellings.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def test_the_fixture_store_migrates_with_events_and_reads_the_old_state_as_of_before(
        old_store: Path, tmp_path: Path) -> None:
    last = len(OPS)
    before = old_state(old_store, last)
    file = spellings(tmp_path, "Größe", "Grüße", "café", "5K PB", "", "home city", "Zürich")
    log = ok(old_store, "log")
    dry = ok(old_store, "migrate", "keys", "--dry-run", "--spellings", file)
    assert dry == [
        {"action": "conflict", "from": "gr_e", "to": ["grösse", "grüsse"], "spellings": ["Größe", "Grüße"],
         "namespaces": ["default"], "reason": dry[0]["reason"]},
        {"action": "would_rekey", "namespace": "default", "from": "caf", "to": "café", "spellings": ["café"],
         "operations": 2},
        {"dry_run": True, "key_edition": 1, "would_switch_to": 2, "rekeyed": 1, "conflicts": 1}]
    assert ok(old_store, "log") == log and ok(old_store, "stats")[0]["key_edition"] == 1  # nothing changed

    done = ok(old_store, "migrate", "keys", "--spellings", file)
    assert done[1] == {"action": "rekey", "namespace": "default", "from": "caf", "to": "café",
                       "spellings": ["café"], "events": [last + 1, last + 2]}
    assert done[-1] == {"dry_run": False, "key_edition": 2, "since": last + 1, "rekeyed": 1, "conflicts": 1}
    assert old_state(old_store, last) == before  # as of before the migration: exactly the old state
    with pmem.open(old_store) as s:
        assert s.stats()["key_edition"] == 2
        assert s.get("café").value == "Paris" and s.get("caf").value is None
        (v,) = s.history("café").versions
        assert v.sources == ("pmem migrate keys",) and v.evidence == (last + 1,)
        moved = [e for e in s.log(after=last)]
        assert [(e["op"], e["key"]) for e in moved] == [("accept", "café"), ("revoke", "caf")]
        assert all("migrated" in e["text"] for e in moved)
        assert s.get("gr_e").value == "180"  # the conflict: left alone
        assert s.accept("Größe", "181").key == "grösse"  # new writes: edition 2
        assert s.accept("東京", "capital").key == "東京"
    assert ok(old_store, "migrate", "keys") == [
        {"key_edition": 2, "changed": False, "reason": "the store already uses key edition 2: nothing to migrate"}]


@pytest.mark.parametrize("content", [b"\xff\xfe not utf-8\n", ("k" * 1100 + "\n").encode()])
def test_a_bad_spellings_file_is_bad_input(old_store: Path, tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.txt"
    path.write_bytes(content)
    log = ok(old_store, "log")
    for args in (("--spellings", str(path)), ("--spellings", str(tmp_path / "missing.txt"))):
        r = run_pmem(old_store, "migrate", "keys", *args)
        assert r.returncode == 2 and error(r)["detail"]
    assert ok(old_store, "log") == log and ok(old_store, "stats")[0]["key_edition"] == 1


def edition1_store(backend: Backend) -> str:
    """A new store that keeps key edition 1, as the previous release left its stores."""
    url = backend.new_url()
    db = open_backend(url)
    if backend.name == "postgres":
        with db.setting_up():
            pass
    conn = db.connect_projections()
    with conn.write("projections"):
        conn.execute("CREATE TABLE pmem_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("INSERT INTO pmem_meta VALUES ('key_edition', '1')")
    conn.close()
    return url


def test_a_cell_with_alternatives_moves_whole_on_both_backends(backend: Backend) -> None:
    url = edition1_store(backend)
    with pmem.open(url) as s:
        assert s.key_edition == 1
        s.accept("Straße", "Hauptstraße 1", trust=70)
        s.contest("Straße", "Bahnhofstraße 2", trust=60)
        s.accept("Straße", "gone", namespace="other")
        last = s.last_index()
        old = s.get("Straße", disclose=["alternatives"])
        assert old.key == "stra_e" and old.status == "contested"
        out = s.migrate_keys(["Straße"])
        assert [r["action"] for r in out[:-1]] == ["rekey", "rekey"]
        assert out[-1]["since"] == last + 1 and s.key_edition == 2
        new = s.get("Straße", disclose=["alternatives"])
        assert (new.key, new.value, new.alternatives, new.status) == ("strasse", old.value, old.alternatives,
                                                                       "contested")
        assert {v.trust for v in s.history("Straße").versions} == {70, 60}
        assert s.get("stra_e").value is None and s.get("Straße", namespace="other").value == "gone"
        assert s.get("Straße", as_of=last).key == "stra_e"
        assert s.get("Straße", as_of=last).value == old.value
        # an interrupted migration (the events written, the switch not) is finished by running it again
        s.projection_db.execute("UPDATE pmem_meta SET value='1' WHERE name='key_edition'")
    with pmem.open(url) as s:
        assert s.key_edition == 1
        again = s.migrate_keys(["Straße"])
        assert again[-1]["since"] == last + 1 and s.last_index() == last + 6  # no new event
