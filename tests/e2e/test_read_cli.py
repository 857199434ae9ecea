"""``pmem read`` as a user runs it: one JSON object holding the context an agent would receive, its size
in characters and tokens; bad input is one JSON error on stderr."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.test_cli import error, ok, pmem

READ_FIELDS = {"question", "mode", "context", "chars", "tokens", "items", "pruned", "lookups", "gated"}


def seed(db: Path) -> None:
    ok(db, "accept", "5K PB", "27:12", "--text", "My 5K PB is 27:12.")  # 1
    ok(db, "accept", "5K PB", "25:50", "--text", "My 5K PB is now 25:50.")  # 2
    ok(db, "accept", "home city", "Porto", "--text", "I live in Porto.")  # 3
    ok(db, "contest", "home city", "Lyon", "--text", "Anna says I live in Lyon.")  # 4


def test_read_prints_the_context_current_value_first_with_its_size(db_path: Path) -> None:
    seed(db_path)
    (r,) = ok(db_path, "read", "5k pb now?", "-k", "1")
    assert set(r) == READ_FIELDS
    assert (r["mode"], r["context"], r["items"]) == ("cells", "5k_pb = 25:50", ["5k_pb"])
    assert r["chars"] == len(r["context"]) and r["tokens"] == 9


def test_read_discloses_history_and_shows_contested_claims(db_path: Path) -> None:
    seed(db_path)
    (r,) = ok(db_path, "read", "5k pb", "-k", "1", "--disclose", "history")
    assert r["context"] == "5k_pb = 25:50\n  history: 27:12 (superseded)"
    (r,) = ok(db_path, "read", "home city", "-k", "1")
    assert r["context"] == "home_city = Porto (trust 50)  [contested: Lyon (trust 50)]"


def test_read_turns_prunes_the_superseded_turn_for_a_current_value_question(db_path: Path) -> None:
    seed(db_path)
    (r,) = ok(db_path, "read", "What is my 5K PB now?", "--mode", "turns", "-k", "2")
    assert r["gated"] and r["pruned"] == ["1"] and "27:12" not in r["context"]


def test_read_dated_puts_each_cell_after_the_day_its_value_was_observed(db_path: Path) -> None:
    ok(db_path, "accept", "home city", "Porto", "--observed-at", "2023-05-08T13:56:00")
    (r,) = ok(db_path, "read", "home city", "-k", "1", "--dated")
    assert r["context"] == "[8 May 2023] home_city = Porto"
    (r,) = ok(db_path, "read", "home city", "-k", "1")
    assert r["context"] == "home_city = Porto"


def test_read_budget_caps_the_tokens(db_path: Path) -> None:
    seed(db_path)
    (r,) = ok(db_path, "read", "5k pb", "--budget", "10")
    assert r["tokens"] <= 10 and len(r["items"]) == 1


def test_bad_read_input_is_one_json_error_naming_it(db_path: Path) -> None:
    assert "--budget must be a positive" in error(pmem(db_path, "read", "q", "--budget", "0"))["detail"]
    assert "invalid choice: 'graph'" in error(pmem(db_path, "read", "q", "--mode", "graph"))["detail"]
    assert "unknown disclosure 'all'" in error(pmem(db_path, "read", "q", "--disclose", "all"))["detail"]
    assert "non-empty" in error(pmem(db_path, "read", " "))["detail"]


def test_help_lists_read() -> None:
    import subprocess

    from tests.conftest import PMEM_BIN

    out = subprocess.run([PMEM_BIN, "read", "--help"], capture_output=True, text=True).stdout
    assert "--mode" in out and "--budget" in out and "--disclose" in out


@pytest.mark.parametrize("heading", ["# Reading: the context an agent receives", "## Dated cells"])
def test_the_docs_read_walkthroughs_print_what_they_show(tmp_path: Path, heading: str) -> None:
    """The first console block after ``heading`` in docs/reading.md, run on a fresh store."""
    import json
    import os
    import re
    import shlex
    import subprocess

    from tests.conftest import PMEM_BIN, ROOT

    readme = (ROOT / "docs" / "reading.md").read_text()
    start = readme.index(heading + "\n")
    console = re.compile(r"```console\n(.*?)```", re.S).search(readme, start)
    assert console is not None
    env = {**os.environ, "PMEM_DB": str(tmp_path / "mem.db")}
    lines = console.group(1).splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("$ "):
            continue
        outs = []
        for cmd in line[2:].split(" && "):
            r = subprocess.run([PMEM_BIN, *shlex.split(cmd)[1:]], env=env, capture_output=True, text=True)
            assert r.returncode == 0, (cmd, r.stderr)
            outs.append(r.stdout.strip())
        shown = lines[i + 1] if i + 1 < len(lines) and not lines[i + 1].startswith("$ ") else None
        if shown is None:
            continue
        got = json.loads(outs[-1])
        if shown.startswith("{..."):  # an excerpt: every "field":value shown must match
            for field, value in re.findall(r'"(\w+)":("(?:[^"\\]|\\.)*"|\[[^\]]*\]|true|false|\d+)', shown):
                assert got[field] == json.loads(value), (field, got)
        else:
            assert got == json.loads(shown)


def test_read_counts_lower_trust_claims_and_min_trust_leaves_them_out(db_path: Path) -> None:
    ok(db_path, "accept", "home city", "Porto", "--source", "user", "--trust", "90")
    for city in ("Lyon", "Oslo"):
        ok(db_path, "contest", "home city", city, "--source", "attacker", "--trust", "10")
    (r,) = ok(db_path, "read", "home city", "-k", "1")
    assert r["context"] == "home_city = Porto (user, trust 90)  [contested: +2 lower-trust claims]"
    (r,) = ok(db_path, "read", "home city", "-k", "1", "--all-alternatives")
    assert r["context"] == ("home_city = Porto (user, trust 90)  "
                            "[contested: Lyon (attacker, trust 10) | Oslo (attacker, trust 10)]")
    (r,) = ok(db_path, "read", "home city", "-k", "1", "--min-trust", "50")
    assert r["context"] == "home_city = Porto"
    bad = pmem(db_path, "read", "home city", "--min-trust", "101")
    assert bad.returncode == 2 and "min_trust must be a trust from 0 to 100" in error(bad)["detail"]
