"""The validity benchmark's deterministic mode at small n (what CI runs): the harness writes its JSON,
table and plots, and P-Mem meets the issue's goals on the context metrics, whatever the baselines show.

The benchmark reads its data from ``../shared/data``; here it runs on the copies vendored under
``tests/data`` (the same FactConsolidation 6k files and ALFWorld vocabulary, MIT: tests/data/README.md),
so the check runs in a clone of this repository alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

DATA = ROOT / "tests" / "data"
# Load scripts/bench_validity.py as a module, point its data paths at tests/data, run its main; every file
# the run opens is listed (an audit hook), so the test can tell which data it really read.
RUN_ON_TEST_DATA = """
import importlib.util, sys
from pathlib import Path
script, data, opened_list, *argv = sys.argv[1:]
opened = []
sys.addaudithook(lambda event, args: opened.append(str(args[0])) if event == "open" else None)
spec = importlib.util.spec_from_file_location("bench_validity", script)
bench = importlib.util.module_from_spec(spec)
sys.modules["bench_validity"] = bench
spec.loader.exec_module(bench)
bench.DATA = Path(data)
bench.ALFWORLD = bench.DATA / "alfworld" / "alfworld_vocab_from_constants.json"
bench.FC_DIR = bench.DATA / "factconsolidation"
code = bench.main(argv)
Path(opened_list).write_text("\\n".join(opened))
raise SystemExit(code)
"""
READ = {"alfworld/alfworld_vocab_from_constants.json", "factconsolidation/factconsolidation_6k_context.txt",
        "factconsolidation/questions_6k.jsonl"}  # --quick builds no synthetic streams: no templates read


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("validity")
    opened = out.parent / "opened.txt"
    r = subprocess.run([sys.executable, "-c", RUN_ON_TEST_DATA, str(ROOT / "scripts" / "bench_validity.py"),
                        str(DATA), str(opened), "--quick", "--out", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    files = {Path(p).resolve() for p in opened.read_text().splitlines() if p}
    assert {DATA / name for name in READ} <= files  # the vendored copies were read ...
    shared = (ROOT.parent / "shared").resolve()
    assert not [f for f in files if f.is_relative_to(shared)]  # ... and nothing from ../shared
    return out, json.loads((out / "results.json").read_text())


def test_the_harness_writes_json_a_markdown_table_and_png_plots(results: tuple[Path, dict]) -> None:
    out, _ = results
    assert (out / "table.md").read_text().startswith("Validity benchmark, commit")
    for png in ("accuracy_vs_L.png", "stale_rate.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_commit_read_holds_the_current_value_at_every_revision_depth(results: tuple[Path, dict]) -> None:
    _, r = results
    for per_arm in r["revision"].values():
        assert per_arm["commit"]["head"] == 100.0 and per_arm["commit"]["valid"] == 100.0
        assert set(per_arm) == {"commit", "raw", "raw+tags", "raw oracle order", "CRUD"}


def test_a_retraction_recovers_the_displaced_value_where_crud_loses_it(results: tuple[Path, dict]) -> None:
    _, r = results
    for d in ("d=0", "d=32"):
        assert r["retraction"][d]["commit"]["recovered"] == 100.0
        assert r["retraction"][d]["CRUD"]["recovered"] == 0.0


def test_a_conflict_is_flagged_before_settling_and_right_after(results: tuple[Path, dict]) -> None:
    _, r = results
    assert r["contest"]["commit"] == {"flagged before settling": 100.0, "correct after": 100.0}


def test_the_factconsolidation_read_holds_the_gold_value_without_stale_ones(results: tuple[Path, dict]) -> None:
    _, r = results
    single = r["factconsolidation"]["6k"]["P-Mem"]["single"]
    assert single["gold"] >= 95.0 and single["stale"] <= 5.0
    assert set(r["factconsolidation"]["6k"]) >= {"P-Mem", "raw", "raw+tags", "CRUD", "long-context"}
