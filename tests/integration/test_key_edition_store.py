"""A store keeps its key edition. ``tests/data/edition1_store`` is a store written by the release before
edition 2 (commit 7fef8c8, from ``ops.jsonl``), with what that release's CLI printed for each command of
``commands.txt`` (``expected.jsonl``): today's code must print exactly the same."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

import pmem
from tests.conftest import PMEM_BIN, ROOT

FIXTURE = ROOT / "tests" / "data" / "edition1_store"
CASES = [json.loads(line) for line in (FIXTURE / "expected.jsonl").read_text().splitlines()]


@pytest.fixture
def old_store(tmp_path: Path) -> Path:
    db = tmp_path / "store.sqlite3"
    shutil.copy(FIXTURE / "store.sqlite3", db)
    return db


def test_the_fixture_is_what_its_commands_describe() -> None:
    assert [c["args"] for c in CASES] == [shlex.split(line) for line in (FIXTURE / "commands.txt").read_text()
                                          .splitlines()]
    assert len(CASES) >= 20 and all(c["rc"] == 0 for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=[" ".join(c["args"]) for c in CASES])
def test_a_store_from_the_previous_release_reads_exactly_as_before(old_store: Path, case: dict[str, object]) -> None:
    args = case["args"]
    assert isinstance(args, list)
    r = subprocess.run([PMEM_BIN, *args], capture_output=True, text=True, env={**os.environ, "PMEM_DB": str(old_store)})
    assert (r.returncode, r.stdout, r.stderr) == (case["rc"], case["stdout"], case["stderr"])


def test_it_keeps_key_edition_1_for_new_writes_too(old_store: Path) -> None:
    with pmem.open(old_store) as store:
        assert store.stats()["key_edition"] == 1
        r = store.accept("Grüße", "servus", trust=60)
        assert r.key == "gr_e" and store.get("Größe").value == "servus"
        with pytest.raises(pmem.InvalidOperation, match="empty after normalisation"):
            store.accept("東京", "capital")


def test_a_new_store_uses_edition_2_and_records_it(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    with pmem.open(db) as store:
        assert store.stats()["key_edition"] == 2
        store.accept("Größe", "180")
        store.accept("Grüße", "hallo")
        assert store.accept("東京", "capital").key == "東京"
        assert {c.key: c.value for c in store.frontier()} == {"grösse": "180", "grüsse": "hallo", "東京": "capital"}
    with pmem.open(db) as store:
        assert store.stats()["key_edition"] == 2 and store.get("GRÖSSE").value == "180"
