"""The ``pmem`` command line as a user (or another program) runs it: SPEC §9, exactly."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.cli_runner import run_cli
from tests.conftest import PMEM_BIN


def pmem(db: str | Path, *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[bytes]:
    """``pmem --db DB ARGS`` in this process (tests/cli_runner.py); the tests at the end of this file start
    the console script itself."""
    return run_cli(["--db", str(db), *args], stdin=stdin, env=env)


def lines(out: bytes) -> list[dict[str, Any]]:
    return [json.loads(x) for x in out.decode().splitlines() if x.strip()]


def ok(db: str | Path, *args: str, stdin: bytes | None = None) -> list[dict[str, Any]]:
    r = pmem(db, *args, stdin=stdin)
    assert r.returncode == 0, r.stderr
    assert r.stderr == b""
    return lines(r.stdout)


def error(r: subprocess.CompletedProcess[bytes]) -> dict[str, Any]:
    assert r.returncode != 0 and r.stdout == b""
    err_lines = r.stderr.decode().splitlines()
    assert len(err_lines) == 1, r.stderr  # one JSON line, never a traceback
    obj = json.loads(err_lines[0])
    assert set(obj) == {"error", "detail"}
    return obj


def test_single_operations_print_one_receipt(db: str) -> None:
    (r,) = ok(db, "accept", "5K PB", "27:12", "--source", "coach", "--trust", "70", "--op-id", "m1")
    assert r == {"event_index": 1, "key": "5k_pb", "op": "accept", "applied": True,
                 "head": {"value": "27:12", "status": "active"}, "namespace": "default",
                 "requested": "accept", "op_id": "m1"}
    (r,) = ok(db, "accept", "5K PB", "25:50", "--trust", "10")
    assert r["op"] == "contest" and r["applied"] and "trust 10" in r["reason"]
    (r,) = ok(db, "resolve", "5k pb", "25:50", "--trust", "90")
    assert r["head"] == {"value": "25:50", "status": "active"}
    (r,) = ok(db, "revoke", "5k pb", "--trust", "90")
    assert r["applied"] and r["head"] is None  # the winner had no predecessor: the cell is empty
    (r,) = ok(db, "support", "5k pb")
    assert r == {**r, "op": "noop", "applied": False, "reason": "support target not open"}


def test_get_frontier_history_and_log(db: str) -> None:
    ok(db, "accept", "budget", "$30k", "--source", "email")
    ok(db, "accept", "budget", "$50k")
    ok(db, "contest", "room", "A")  # noop: no incumbent
    ok(db, "accept", "room", "A")
    ok(db, "contest", "room", "B", "--source", "mail")
    ok(db, "reject", "budget")
    (cell,) = ok(db, "get", "budget", "--disclose", "history,support")
    assert cell["value"] == "$30k" and cell["status"] == "active" and cell["alternatives"] == []
    assert cell["history"] == [{"value": "$50k", "status": "contradicted", "closed_at": 6, "opened_at": 2}]
    assert cell["support"] == {"count": 0, "trust": 50, "sources": ["email"]}
    assert ok(db, "get", "budget", "--as-of", "2")[0]["value"] == "$50k"
    assert ok(db, "get", "unknown")[0] == {"key": "unknown", "value": None, "status": "empty",
                                              "alternatives": [], "namespace": "default"}
    front = ok(db, "frontier")
    assert [(c["key"], c["value"], c["status"], c["alternatives"]) for c in front] == [
        ("budget", "$30k", "active", []), ("room", "A", "contested", ["B"])]
    assert [c["key"] for c in ok(db, "frontier", "--as-of", "3")] == ["budget"]
    (hist,) = ok(db, "history", "budget")
    assert [(v["value"], v["status"], v["supersedes"], v["opened_at"], v["closed_at"]) for v in hist["versions"]] == [
        ("$30k", "active", None, 1, None), ("$50k", "contradicted", 0, 2, 6)]
    assert hist["versions"][0]["intervals"] == [[1, 2], [6, None]]
    log = ok(db, "log")
    assert [(e["event_index"], e["key"], e["op"], e["value"]) for e in log] == [
        (1, "budget", "accept", "$30k"), (2, "budget", "accept", "$50k"), (3, "room", "noop", "A"),
        (4, "room", "accept", "A"), (5, "room", "contest", "B"), (6, "budget", "reject", None)]
    assert log[2]["reason"] == "contest needs an incumbent" and log[2]["applied"] is False
    assert [e["event_index"] for e in ok(db, "log", "--after", "2", "--limit", "2")] == [3, 4]


def test_apply_prints_one_receipt_per_line_in_order(db: str) -> None:
    batch = b"\n".join(json.dumps(d).encode() for d in [
        {"op": "accept", "key": "a", "value": "1"},
        {"op": "revise", "key": "a", "new_value": "2", "old_value": "1"},
        {"op": "revise", "key": "a", "new_value": "3", "old_value": "1"},
        {"op": "reject", "key": "a", "value": "9", "source": "s", "trust": 50, "text": "no, 9"},
    ]) + b"\n\n"
    rs = ok(db, "apply", "-", stdin=batch)
    assert [(r["event_index"], r["op"], r["applied"]) for r in rs] == [
        (1, "accept", True), (2, "accept", True), (3, "noop", False), (4, "reject", True)]
    assert rs[2]["reason"] == "stale old_value: head is '2'"


def test_apply_reads_a_file(db: str, tmp_path: Path) -> None:
    f = tmp_path / "ops.jsonl"
    f.write_text('{"op": "accept", "key": "k", "value": "v"}\n')
    assert ok(db, "apply", str(f))[0]["event_index"] == 1


BAD_LINES = [
    (b'{"op": "accept", "key": "k", "value": "v"', "malformed JSON"),
    (b'{"op": "overwrite", "key": "k", "value": "v"}', "unknown op 'overwrite'"),
    (b'{"key": "k", "value": "v"}', "unknown op missing"),
    (b'{"op": "accept", "value": "v"}', "missing 'key'"),
    (b'{"op": "accept", "key": "", "value": "v"}', "'key' is empty"),
    (b'{"op": "accept", "key": " !! ", "value": "v"}', "empty after normalisation"),
    (b'{"op": "accept", "key": "k"}', "missing 'value'"),
    (b'{"op": "resolve", "key": "k"}', "missing 'value'"),
    (b'{"op": "revise", "key": "k", "value": "v"}', "unknown field 'value' for revise"),
    (b'{"op": "accept", "key": "k", "value": "' + b"x" * (64 * 1024 + 1) + b'"}', "over 64 KiB"),
    (b'{"op": "accept", "key": "k", "value": "caf\xe9"}', "invalid UTF-8"),
    (b'{"op": "accept", "key": "k", "value": 42}', "'value' must be a string"),
    (b'{"op": "accept", "key": "k", "value": "v", "trust": 101}', "'trust' must be an integer from 0 to 100"),
    (b'{"op": "accept", "key": "k", "value": "v", "trust": true}', "'trust' must be an integer"),
    (b'{"op": "accept", "key": "k", "value": "v", "confidence": 0.4}', "unknown field 'confidence'"),
    (b'{"op": "accept", "key": "k", "value": "v", "observed_at": "yesterday"}', "not ISO-8601"),
    (b'["accept", "k", "v"]', "must be a JSON object"),
]


@pytest.mark.parametrize(("bad", "message"), BAD_LINES, ids=[m for _, m in BAD_LINES])
def test_a_bad_line_rejects_the_whole_batch_naming_the_line_and_writes_nothing(
        db: str, bad: bytes, message: str) -> None:
    good = b'{"op": "accept", "key": "good", "value": "v"}'
    r = pmem(db, "apply", "-", stdin=good + b"\n" + good + b"\n" + bad + b"\n" + good + b"\n")
    err = error(r)
    assert err["error"] == "invalid batch" and err["detail"].startswith("line 3: ")
    assert message.split(" missing")[0] in err["detail"]
    assert r.returncode == 2
    assert ok(db, "log") == []  # nothing was written (the store may not even exist yet)


def test_a_value_of_exactly_64_kib_is_accepted(db: str) -> None:
    value = "x" * (64 * 1024)
    assert ok(db, "accept", "k", value)[0]["head"]["value"] == value


def test_usage_errors_are_json_too(db: str) -> None:
    for args in (("frobnicate",), ("get",), ("accept", "k"), ("get", "k", "--as-of", "x"),
                 ("get", "k", "--as-of", "-1"), ("get", "k", "--disclose", "everything"), ()):
        err = error(pmem(db, *args))
        assert err["detail"], args


def test_missing_file_is_a_clear_error(db: str, tmp_path: Path) -> None:
    err = error(pmem(db, "apply", str(tmp_path / "missing.jsonl")))
    assert "missing.jsonl" in err["detail"]


def test_an_unopenable_database_is_a_json_error(tmp_path: Path) -> None:
    err = error(pmem(tmp_path / "no" / "such" / "dir.db", "accept", "k", "v"))
    assert err["error"] == "store unavailable" and "does not exist" in err["detail"]


@pytest.mark.parametrize("command", [("get", "k"), ("accept", "k", "v"), ("rebuild",)])
def test_a_database_name_too_long_for_the_file_system_is_a_json_error_not_an_internal_one(
        tmp_path: Path, command: tuple[str, ...]) -> None:
    r = pmem(tmp_path / ("x" * 1000), *command)
    assert r.returncode == 1, r.stderr
    err = error(r)
    assert err["error"] == "store unavailable" and err["detail"].endswith(": File name too long")


def test_db_defaults_to_pmem_db_env_then_cwd(tmp_path: Path) -> None:
    import os

    env = {**os.environ, "PMEM_DB": str(tmp_path / "env.db")}
    r = subprocess.run([PMEM_BIN, "accept", "k", "v"], capture_output=True, env=env, cwd=tmp_path)
    assert r.returncode == 0 and (tmp_path / "env.db").exists()
    env.pop("PMEM_DB")
    r = subprocess.run([PMEM_BIN, "accept", "k", "v"], capture_output=True, env=env, cwd=tmp_path)
    assert r.returncode == 0 and (tmp_path / "pmem.db").exists()


def test_global_options_work_before_or_after_the_command(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    assert subprocess.run([PMEM_BIN, "accept", "k", "v", "--db", db, "--namespace", "n"]).returncode == 0
    r = subprocess.run([PMEM_BIN, "--namespace", "n", "--db", db, "get", "k"], capture_output=True)
    assert json.loads(r.stdout)["value"] == "v"
    r = subprocess.run([PMEM_BIN, "--db", db, "get", "k"], capture_output=True)
    assert json.loads(r.stdout)["status"] == "empty"  # other namespace


def test_help_lists_every_command() -> None:
    r = subprocess.run([PMEM_BIN, "--help"], capture_output=True, text=True)
    assert r.returncode == 0
    for cmd in ("apply", "accept", "contest", "reject", "revoke", "resolve", "support", "get", "frontier",
                "history", "log", "demo"):
        assert cmd in r.stdout
