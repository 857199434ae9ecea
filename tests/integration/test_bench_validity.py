"""The validity benchmark's deterministic mode at small n (what CI runs): the harness writes its JSON,
table and plots, and P-Mem meets the issue's goals on the context metrics, whatever the baselines show."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, SHARED

pytestmark = pytest.mark.skipif(not (SHARED / "data" / "factconsolidation").is_dir(),
                                reason="needs ../shared/data (FactConsolidation and ALFWorld)")


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("validity")
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_validity.py"), "--quick", "--out", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
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
