"""Exit codes of ``pmem`` for bad input, so a caller can tell its own mistake from a bug: 2 and one JSON line
for every bad argument, including out-of-range integers and undecodable bytes; 70 only for a genuine bug.
See docs/decisions.md, "Input validation"."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.cli_runner import run_cli
from tests.conftest import PMEM_BIN

TOO_BIG = "9223372036854775808"  # 2**63: one past the largest event index


def pmem(db: Path, *args: str | bytes, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """In this process (tests/cli_runner.py); the ``:memory:`` check below starts the console script."""
    return run_cli(["--db", str(db), *args], stdin=stdin, env={"PATH": "/usr/bin:/bin", "PMEM_EMBEDDER": "hashing"})


def usage_error(r: subprocess.CompletedProcess[bytes]) -> dict[str, Any]:
    """Exit 2, nothing on stdout, one JSON line on stderr (never a traceback)."""
    assert r.returncode == 2, r.stderr
    assert r.stdout == b""
    (line,) = r.stderr.decode().splitlines()
    err = json.loads(line)
    assert set(err) == {"error", "detail"}
    return err


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "mem.db"
    assert pmem(path, "accept", "k", "v").returncode == 0
    return path


@pytest.mark.parametrize("argv", [
    ["get", "k", "--as-of", TOO_BIG], ["frontier", "--as-of", TOO_BIG], ["history", "k", "--as-of", TOO_BIG],
    ["next", "--as-of", TOO_BIG], ["graph", "export", "--as-of", TOO_BIG], ["log", "--after", TOO_BIG],
    ["log", "--limit", TOO_BIG], ["search", "q", "--as-of", TOO_BIG],
    ["read", "q", "--as-of", TOO_BIG], ["search", "q", "-k", TOO_BIG], ["read", "q", "-k", TOO_BIG],
    ["read", "q", "--budget", TOO_BIG], ["next", "--k", TOO_BIG], ["get", "k", "--as-of", "1" + "0" * 40],
], ids=lambda a: " ".join(a[:3]))
def test_an_integer_beyond_2_63_minus_1_exits_2_with_one_line(db: Path, argv: list[str]) -> None:
    err = usage_error(pmem(db, *argv))
    assert "no larger than 9223372036854775807" in err["detail"]


def test_the_largest_event_index_reads_the_present(db: Path) -> None:
    r = pmem(db, "get", "k", "--as-of", "9223372036854775807")
    assert r.returncode == 0 and json.loads(r.stdout)["value"] == "v"


@pytest.mark.parametrize(("argv", "named"), [
    ([b"--namespace", b"\xff", b"accept", b"k", b"v"], "the value of --namespace"),
    ([b"accept", b"k", b"v", b"--namespace=\xff"], "the value of --namespace"),
    ([b"read", b"q\xff"], "argument 4"),
    ([b"accept", b"k\xfe", b"v"], "argument 4"),
    ([b"accept", b"k", b"v", b"--source", b"\xc3"], "the value of --source"),
    ([b"\xff"], "argument 3"),
], ids=["namespace", "namespace=", "read", "key", "source", "command"])
def test_an_undecodable_argument_exits_2_naming_it(db: Path, argv: list[bytes], named: str) -> None:
    err = usage_error(pmem(db, *argv))
    assert err["detail"].startswith(f"pmem: {named} is not valid UTF-8: b'")
    assert pmem(db, "log").stdout.count(b"\n") == 1  # nothing was written


@pytest.mark.parametrize("namespace", ["", "   "])
def test_an_empty_namespace_exits_2_instead_of_meaning_default(db: Path, namespace: str) -> None:
    err = usage_error(pmem(db, "--namespace", namespace, "accept", "k", "w"))
    assert err["detail"].startswith("'--namespace' is empty")
    usage_error(pmem(db, "get", "k", f"--namespace={namespace}"))
    assert pmem(db, "log").stdout.count(b"\n") == 1


def test_log_limit_0_prints_no_event(db: Path) -> None:
    r = pmem(db, "log", "--limit", "0")
    assert r.returncode == 0 and r.stdout == b"" and r.stderr == b""
    assert pmem(db, "log", "--limit", "1").stdout.count(b"\n") == 1


@pytest.mark.parametrize("argv", [
    ["accept", "k", "   "], ["contest", "k", "\t"], ["revise", "k", " "], ["revise", "k", "w", "--old-value", "  "],
], ids=lambda a: a[0])
def test_a_whitespace_only_value_exits_2_like_an_empty_one(db: Path, argv: list[str]) -> None:
    err = usage_error(pmem(db, *argv))
    assert "is empty (whitespace only)" in err["detail"]


def test_a_whitespace_only_value_in_a_batch_rejects_the_batch(db: Path) -> None:
    batch = b'{"op":"accept","key":"a","value":"x"}\n{"op":"accept","key":"b","value":"  "}\n'
    err = usage_error(pmem(db, "apply", "-", stdin=batch))
    assert err["detail"] == "line 2: 'value' is empty (whitespace only)"
    assert pmem(db, "log").stdout.count(b"\n") == 1


def test_db_memory_exits_2_instead_of_losing_the_write(tmp_path: Path) -> None:
    err = usage_error(subprocess.run([PMEM_BIN, "--db", ":memory:", "accept", "k", "v"], capture_output=True))
    assert ":memory:" in err["detail"]


def test_unmerge_refuses_a_key_over_1_kib(db: Path) -> None:
    err = usage_error(pmem(db, "unmerge", "k" * 1025))
    assert err["detail"] == "'key' is over 1 KiB"


@pytest.mark.parametrize("breaker", ["\x85", "\u2028"])
def test_an_argument_or_value_holding_a_unicode_line_break_still_gives_one_line(db: Path, breaker: str) -> None:
    err = usage_error(pmem(db, "apply", f"no{breaker}such.jsonl"))  # the error quotes the argument
    assert f"no{breaker}such.jsonl" in err["detail"]
    r = pmem(db, "apply", "-", stdin=json.dumps({"op": "accept", "key": "k", "value": f"a{breaker}b"}).encode())
    assert r.returncode == 0, r.stderr
    (line,) = r.stdout.decode().splitlines()  # the receipt is one line for every line reader
    assert json.loads(line)["head"]["value"] == f"a{breaker}b"
