"""Fuzzing the ``pmem`` command line: arbitrary arguments and operation lines, run
in-process through :func:`pmem.adapters.entrypoints.cli.main` on a real SQLite file.

Whatever comes in: never exit 70 (an internal error), never a traceback; a failure is exit 1 or 2 with
one JSON line on stderr; and a rejected ``apply`` batch writes nothing (``last_index()`` unchanged)."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pmem
from pmem.adapters.entrypoints.cli import main
from tests.conftest import examples

COMMANDS = ["apply", "accept", "contest", "reject", "revoke", "resolve", "support", "revise", "get", "frontier",
            "history", "log", "stats", "search", "unmerge", "read", "next", "require", "check", "graph",
            "rebuild", "ingest"]
OPTIONS = ["--as-of", "--after", "--limit", "-k", "--k", "--budget", "--namespace", "--source", "--trust", "--text",
           "--op-id", "--observed-at", "--node-type", "--old-value", "--correction", "--hard-commit", "--disclose",
           "--mode", "--projection", "--previous", "--confidence", "--exclusive", "--write", "--key", "--format",
           "--extractor", "--annotator", "--soft-keys", "--key-threshold", "--quiet", "export", "-", "--db"]
SETTINGS = settings(max_examples=examples(150), deadline=None, derandomize=False,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _undecodable(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")  # what Python makes of undecodable bytes in argv


numbers = st.one_of(st.integers(), st.integers(min_value=2**62, max_value=2**70), st.integers(-2**70, -1),
                    st.sampled_from([0, 1, 2**63 - 1, 2**63, 2**64, 10**40]))
values = st.one_of(
    numbers.map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.text(max_size=12),
    st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=6),
    st.binary(max_size=6).map(_undecodable),
    st.sampled_from(["", " ", "   ", "k", "v", "default", "\t", "-1", "1e3", "0x10", ":memory:", "all", "vectors",
                     "json", "dot", "history,alternatives", "turns", "a=b,c=d", "\ud800", "\udcff",
                     "2026-05-01T10:00:00", "event", "x" * 1100]),
)
POSITIONALS = {"apply": 1, "accept": 2, "contest": 2, "reject": 2, "revoke": 2, "resolve": 2, "support": 2,
               "revise": 2, "get": 1, "history": 1, "search": 1, "unmerge": 1, "read": 1, "require": 2, "check": 2,
               "graph": 1, "ingest": 1}
FLAGS = {"--correction", "--hard-commit", "--write", "--quiet"}
EVIDENCE = ["--source", "--trust", "--text", "--op-id", "--observed-at", "--node-type"]
OPTIONS_OF = {
    **{op: EVIDENCE for op in ("accept", "contest", "reject", "revoke", "resolve", "support")},
    "revise": [*EVIDENCE, "--old-value", "--correction", "--hard-commit"],
    "get": ["--as-of", "--disclose"], "frontier": ["--as-of", "--disclose"], "history": ["--as-of"],
    "log": ["--after", "--limit"], "search": ["-k", "--as-of"], "read": ["--mode", "--budget", "--disclose", "-k",
                                                                        "--as-of"],
    "next": ["--k", "--previous", "--as-of"], "check": ["--confidence", "--exclusive", "--write", "--source",
                                                        "--node-type"],
    "graph": ["--key", "--format", "--as-of"], "rebuild": ["--projection"],
    "ingest": ["--extractor", "--annotator", "--soft-keys", "--key-threshold", "--format"],
}


@st.composite
def argvs(draw: st.DrawFn) -> list[str]:
    """A command with about the right positionals and options, their values drawn from :data:`values`;
    now and then an argument list of anything at all."""
    command = draw(st.sampled_from(COMMANDS))
    if draw(st.integers(0, 9)) == 0:
        return [command, *draw(st.lists(st.one_of(st.sampled_from(OPTIONS), values), max_size=7))]
    n = POSITIONALS.get(command, 0)
    argv = [command] + [draw(values) for _ in range(draw(st.sampled_from([n, n, n, max(n - 1, 0)])))]
    if command == "graph":
        argv[1:2] = ["export"]
    if command in ("apply", "ingest"):
        argv[1:2] = ["-"]
    for option in draw(st.lists(st.sampled_from([*OPTIONS_OF.get(command, []), "--namespace", "--db"]), max_size=4)):
        argv += [option] if option in FLAGS else [option, draw(values)]
    return argv


JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), numbers.filter(lambda n: -2**63 <= n < 2**64), st.floats(allow_nan=False),
              st.text(max_size=8), st.sampled_from(["", "   ", "accept", "k", "v"])),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6)
FIELDS = ["op", "key", "value", "new_value", "old_value", "status", "hard_commit", "namespace", "source", "trust",
          "text", "op_id", "observed_at", "node_type", "vaule"]


@st.composite
def operation_lines(draw: st.DrawFn) -> bytes:
    """One line of ``pmem apply``: a valid operation, a mutated one, arbitrary JSON or arbitrary bytes."""
    kind = draw(st.integers(0, 3))
    if kind == 3:
        return draw(st.binary(max_size=20)).replace(b"\n", b" ")
    base = {"op": draw(st.sampled_from(["accept", "contest", "reject", "revoke", "resolve", "support", "revise"])),
            "key": draw(st.sampled_from(["k", "budget", "Room A", "x.y"]))}
    base["new_value" if base["op"] == "revise" else "value"] = draw(st.sampled_from(["v", "w", "27:12"]))
    if kind >= 1:
        for _ in range(draw(st.integers(1, 3))):
            base[draw(st.sampled_from(FIELDS))] = draw(JSON_VALUES)
    if kind == 2 and draw(st.booleans()):
        return json.dumps(draw(JSON_VALUES)).encode()
    return json.dumps(base).encode("utf-8", "surrogatepass")


class Result:
    def __init__(self, code: int, out: bytes, err: str) -> None:
        self.code, self.out, self.err = code, out, err


def run_cli(argv: list[str], stdin: bytes = b"") -> Result:
    """``pmem ARGV`` in this process, with stdin, stdout and stderr captured."""
    saved = sys.stdin, sys.stdout, sys.stderr
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    err = io.StringIO()
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    sys.stdout, sys.stderr = out, err
    code: object = None
    try:
        main(argv)
    except SystemExit as e:
        code = e.code
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
    out.flush()
    assert isinstance(code, int), f"main ended without an exit code: {code!r}"
    return Result(code, out.buffer.getvalue(), err.getvalue())  # type: ignore[attr-defined]


def check_outcome(argv: list[str], r: Result) -> None:
    assert r.code != 70, (argv, r.err)
    assert "Traceback" not in r.err, (argv, r.err)
    assert r.code in (0, 1, 2), (argv, r.code, r.err)
    if r.code != 0:
        lines = r.err.splitlines()
        assert len(lines) == 1, (argv, r.err)
        assert set(json.loads(lines[0])) == {"error", "detail"}


@pytest.fixture
def store_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(tmp_path)  # anything a fuzzed argument names is created here
    monkeypatch.setenv("PMEM_EMBEDDER", "hashing")  # offline, no model to load
    for name in ("PMEM_DB", "PMEM_LLM_BASE", "PMEM_LLM_MODEL", "PMEM_EMBED_BASE", "PMEM_NAMESPACE"):
        monkeypatch.delenv(name, raising=False)
    db = tmp_path / "fuzz.db"
    with pmem.open(db, embedder="hashing") as s:
        s.apply([{"op": "accept", "key": "k", "value": "v", "text": "the first value"},
                 {"op": "accept", "key": "budget", "value": "$30k"}])
    yield db


def test_no_argument_makes_an_internal_error_or_a_traceback(store_file: Path) -> None:
    @SETTINGS
    @given(argvs(), st.sampled_from([b"", b'{"op":"accept","key":"k","value":"v"}\n', b"a line\n\xff\n"]))
    def run(rest: list[str], stdin: bytes) -> None:
        argv = ["--db", str(store_file), "--quiet", *rest]  # a fuzzed --db names a file here (the cwd)
        check_outcome(argv, run_cli(argv, stdin=stdin))

    run()


def test_no_batch_is_partly_written(store_file: Path) -> None:
    @SETTINGS
    @given(st.lists(operation_lines(), min_size=1, max_size=6), st.sampled_from([None, "other", ""]))
    def run(lines: list[bytes], namespace: str | None) -> None:
        with pmem.open(store_file) as s:
            before = s.last_index()
        argv = ["--db", str(store_file), "apply", "-"] + ([] if namespace is None else ["--namespace", namespace])
        r = run_cli(argv, stdin=b"\n".join(lines) + b"\n")
        check_outcome(argv, r)
        with pmem.open(store_file) as s:
            after = s.last_index()
            if r.code != 0:
                assert after == before, (lines, r.err)  # a rejected batch wrote nothing
            else:
                receipts = [json.loads(x) for x in r.out.splitlines()]
                new = [x for x in receipts if not x.get("duplicate")]
                assert after == before + len(new)
            for event in s.log_store.indexed_events(before + 1):
                assert isinstance(event[1].namespace, str) and isinstance(event[1].key, str)

    run()
