"""The scoring the Mem0 peer benchmark adds (benchmarks/peers/mem0_peer.py), on made-up contexts: a question's own
superseded value shown and ranked above the gold, the new value of a HaluMem update, and the context read back
from the update judge's prompt. Neither mem0 nor a model is loaded."""

from __future__ import annotations

import sys

from benchmarks.halumem import UPDATE_JUDGE_PROMPT
from benchmarks.peers.mem0_peer import (
    OwnSlot,
    judge_context,
    new_in_context,
    slot_ranks,
    stale_above_gold,
    without_line,
)

LINES = ["Ann Lee is a citizen of France.", "Ann Lee plays tennis.", "Ann Lee is a citizen of Peru."]


def test_the_first_stale_line_and_the_first_gold_line_are_ranked() -> None:
    assert slot_ranks(LINES, "Ann Lee", ["France"], ["Peru"]) == (0, 2)
    assert slot_ranks(LINES[1:], "Ann Lee", ["France"], ["Peru"]) == (None, 1)
    assert slot_ranks(["Bob is a citizen of France."], "Ann Lee", ["France"], ["Peru"]) == (None, None)


def test_a_superseded_value_equal_to_the_gold_is_not_stale() -> None:
    assert slot_ranks(LINES, "Ann Lee", ["Peru"], ["peru"]) == (None, 2)


def test_stale_above_gold_when_it_ranks_higher_or_the_gold_is_missing() -> None:
    assert stale_above_gold((0, 2)) and stale_above_gold((1, None))
    assert not stale_above_gold((3, 2)) and not stale_above_gold((None, 0)) and not stale_above_gold((None, None))


def test_own_slot_counts_only_questions_whose_slot_was_overwritten() -> None:
    own = OwnSlot()
    own.add(LINES, ("Ann Lee", ["France"]), ["Peru"])
    own.add(list(reversed(LINES)), ("Ann Lee", ["France"]), ["Peru"])
    own.add(LINES, ("Ann Lee", []), ["Peru"])
    own.add(LINES, None, ["Peru"])
    own.add(LINES, ("Ann Lee", ["Peru"]), ["Peru"])
    assert (own.questions, own.shown, own.above_gold) == (2, 2, 1)


def test_the_new_value_of_an_update_is_found_whatever_else_the_context_shows() -> None:
    context = "Martin's job title is director\nMartin's job title is senior director"
    assert new_in_context(context, "senior director")
    assert not new_in_context("Martin's job title is director\nMartin lives in Lima", "chief executive")


def test_the_context_is_read_back_from_the_update_judges_prompt() -> None:
    context = "a.job = director\nb.city = Lima"
    prompt = UPDATE_JUDGE_PROMPT.format(context=context, old="director", new="senior director")
    assert judge_context(prompt) == context
    assert judge_context(UPDATE_JUDGE_PROMPT.format(context="", old="x", new="y")) == ""


def test_the_peer_module_imports_without_mem0() -> None:
    assert "mem0" not in sys.modules


def test_an_update_points_own_line_is_left_out_and_nothing_else() -> None:
    point = 'Martin\'s income changed from "15700" to "18000" yuan.'
    context = f"{point}\nMartin's monthly income is 15700 yuan\n{point.upper()}"
    assert without_line(context, point) == "Martin's monthly income is 15700 yuan"
