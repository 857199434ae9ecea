"""``pmem get/frontier/history/log/stats`` read the projections and raw rows only: they import no
heavy library (STYLE habit 9), yet a projection that lags the log is caught up before it is read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PMEM_BIN, ROOT

HEAVY = ("eventsourcing", "faiss", "numpy", "onnxruntime", "litellm")
# Runs the CLI in-process, then prints on stderr which heavy modules it loaded.
PROBE = (
    "import sys\n"
    "from pmem.adapters.entrypoints.cli import main\n"
    "try:\n"
    "    main(sys.argv[1:])\n"
    "except SystemExit as e:\n"
    "    code = e.code\n"
    f"sys.stderr.write(repr(sorted(m for m in {HEAVY!r} if m in sys.modules)) + ' ' + repr(code))\n"
)


def probe(db: Path, *args: str) -> tuple[list[str], bytes]:
    """(heavy modules the command imported, its stdout)."""
    r = subprocess.run([sys.executable, "-c", PROBE, "--db", str(db), *args], capture_output=True, cwd=ROOT)
    loaded, code = r.stderr.decode().rsplit(" ", 1)
    assert code == "0", r.stderr
    return eval(loaded), r.stdout  # noqa: S307  (our own repr of a list of names)


def pmem(db: Path, *args: str) -> bytes:
    r = subprocess.run([PMEM_BIN, "--db", str(db), *args], capture_output=True, check=True)
    return r.stdout


@pytest.fixture
def caught_up(tmp_path: Path) -> Path:
    db = tmp_path / "mem.db"
    pmem(db, "accept", "budget", "$30k")
    pmem(db, "contest", "budget", "$50k")
    pmem(db, "get", "budget")  # catches the frontier projection up
    return db


@pytest.mark.parametrize("command", [("get", "budget"), ("get", "budget", "--as-of", "1"), ("frontier",),
                                     ("history", "budget"), ("log",), ("stats",)])
def test_read_commands_on_a_caught_up_store_import_no_heavy_library(caught_up: Path, command: tuple[str, ...]
                                                                     ) -> None:
    loaded, out = probe(caught_up, *command)
    assert loaded == []
    assert out == pmem(caught_up, *command)  # and print what the CLI prints


def test_get_after_a_write_catches_the_projection_up_and_then_reads_without_the_log(caught_up: Path) -> None:
    pmem(caught_up, "accept", "budget", "$40k")
    loaded, out = probe(caught_up, "get", "budget")
    assert json.loads(out)["value"] == "$40k"
    assert "eventsourcing" in loaded  # the new event had to be decoded
    loaded, out = probe(caught_up, "get", "budget")
    assert loaded == [] and json.loads(out)["value"] == "$40k"


def test_log_read_from_raw_rows_prints_what_the_decoded_events_give(caught_up: Path) -> None:
    pmem(caught_up, "support", "budget", "--source", "cfo", "--trust", "80", "--op-id", "x1")
    pmem(caught_up, "revoke", "budget", "$50k", "--text", "withdrawn")
    pmem(caught_up, "reject", "budget")
    import pmem as api
    from pmem.adapters.eventstore.stored_log import object_dict

    with api.open(caught_up) as store:
        want = [object_dict(i, e) for i, e in store.log_store.indexed_events()]
    assert [json.loads(x) for x in pmem(caught_up, "log").splitlines()] == json.loads(json.dumps(want))


def test_a_rebuild_in_a_fresh_process_reads_the_log_and_gives_the_same_reads(caught_up: Path) -> None:
    before = [pmem(caught_up, *c) for c in (("get", "budget", "--disclose", "history,alternatives,support"),
                                             ("history", "budget"), ("frontier",))]
    out = json.loads(pmem(caught_up, "rebuild", "--projection", "frontier"))
    assert out["events"] == 2
    assert [pmem(caught_up, *c) for c in (("get", "budget", "--disclose", "history,alternatives,support"),
                                          ("history", "budget"), ("frontier",))] == before
