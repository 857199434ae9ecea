"""End to end: the installed ``pmem demo`` runs cleanly and tells the paper's six stories correctly."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

PMEM = Path(sys.executable).parent / "pmem"


@pytest.fixture(scope="module")
def demo_cwd(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("demo-cwd")


@pytest.fixture(scope="module")
def demo(demo_cwd: Path) -> subprocess.CompletedProcess[str]:
    # Run from an empty directory with PMEM_DB pointing into it: the demo must use its own temporary store.
    env = {**os.environ, "PMEM_DB": str(demo_cwd / "must-not-be-used.db")}
    return subprocess.run([str(PMEM), "demo"], cwd=demo_cwd, env=env, capture_output=True, text=True,
                          timeout=120)


def answer_to(question: str, output: str) -> str:
    """The ``A:`` line that follows the ``Q:`` line asking ``question``."""
    match = re.search(rf"Q: {re.escape(question)}\n\s*A: (.*)", output)
    assert match, f"question {question!r} not in the demo output"
    return match.group(1)


def test_the_installed_entry_point_exits_zero_with_nothing_on_stderr(
        demo: subprocess.CompletedProcess[str]) -> None:
    assert demo.returncode == 0, demo.stderr
    assert demo.stderr == ""


def test_the_demo_leaves_no_files_behind_and_ignores_pmem_db(
        demo: subprocess.CompletedProcess[str], demo_cwd: Path) -> None:
    assert demo.returncode == 0
    assert list(demo_cwd.iterdir()) == []


def test_the_current_personal_best_is_the_newer_time(demo: subprocess.CompletedProcess[str]) -> None:
    assert answer_to("What is my 5K PB now?", demo.stdout) == "25:50"


def test_the_old_personal_best_is_kept_as_superseded_with_the_event_that_closed_it(
        demo: subprocess.CompletedProcess[str]) -> None:
    assert re.fullmatch(r"27:12 \(superseded, closed at event #\d+\)",
                        answer_to("What was my old PB?", demo.stdout))


def test_retracting_the_budget_raise_reinstates_30k(demo: subprocess.CompletedProcess[str]) -> None:
    assert answer_to("What is the budget now?", demo.stdout).startswith("$30k")
    assert re.search(r"\$50k\s+revoked", demo.stdout)


def test_the_overwriting_dict_is_shown_unable_to_recover_30k(demo: subprocess.CompletedProcess[str]) -> None:
    out = demo.stdout
    assert "plain Python dict" in out
    assert "retraction ignored:         budget = $50k" in out
    assert "retraction by deleting:     budget = (missing)" in out


def test_the_meeting_room_conflict_is_held_open_then_resolved_with_the_loser_contradicted(
        demo: subprocess.CompletedProcess[str]) -> None:
    out = demo.stdout
    assert answer_to("Which room?", out).startswith("meeting_room = Room A  [contested: Room B]")
    assert answer_to("Which room now?", out) == "meeting_room = Room B"
    assert answer_to("What became of Room A?", out) == "kept, recorded as contradicted"


def test_the_revision_chain_reads_its_eighth_value_and_keeps_all_eight(
        demo: subprocess.CompletedProcess[str]) -> None:
    out = demo.stdout
    assert answer_to("Where is the mug?", out) == "shelf"
    chain = out.split("history of mug_location", 1)[1].split("\n\n", 1)[0]
    statuses = re.findall(r"^\s{4}.+?\s+(superseded|active)\s+open", chain, flags=re.M)
    assert statuses == ["superseded"] * 7 + ["active"]


def test_a_low_trust_overwrite_is_lowered_to_contest_and_the_head_stays(
        demo: subprocess.CompletedProcess[str]) -> None:
    out = demo.stdout
    poison = next(line for line in out.splitlines() if '"GB33-5555" from web page' in line)
    assert "applied as contest, not accept" in poison
    assert poison.endswith("head DE44-3131 (contested)")
    assert re.search(r"revoke payee_account from web page.*NOT applied \(insufficient trust\)", out)
    assert answer_to("Which account gets paid?", out).startswith("payee_account = DE44-3131")
    assert "payee_account = DE44-3131\n" in out.split("frontier now", 1)[1]


def test_reading_as_of_an_earlier_event_shows_the_budget_before_the_retraction(
        demo: subprocess.CompletedProcess[str]) -> None:
    out = demo.stdout
    as_of = re.search(r"Time travel: reading as of event #(\d+)", out)
    assert as_of
    assert answer_to(f"What was the budget as of event #{as_of.group(1)}?", out) == "$50k  (now: $30k)"
    then = out.split(f"frontier as of event #{as_of.group(1)}:", 1)[1].split("frontier now", 1)[0]
    assert "budget = $50k" in then and "meeting_room" not in then


def test_the_demo_ends_with_a_one_line_summary_of_events_and_cells(
        demo: subprocess.CompletedProcess[str]) -> None:
    last = demo.stdout.rstrip("\n").splitlines()[-1]
    assert re.fullmatch(r"Summary: \d+ events written, 5 cells\.", last)


def test_two_runs_print_the_same_account(demo: subprocess.CompletedProcess[str]) -> None:
    again = subprocess.run([str(PMEM), "demo"], capture_output=True, text=True, timeout=120)
    assert again.stdout == demo.stdout
