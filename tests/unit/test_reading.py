"""The pure read path (SPEC §6): cell rendering, the current-value gate, supersession pruning, budgets."""

from __future__ import annotations

from pmem.domain.views import CellView, VersionView
from pmem.projections.reading import (
    ReadResult,
    Turn,
    asks_current,
    fit_budget,
    prune_turns,
    readable,
    render_cell,
    render_turn,
    superseded_turns,
    tail_that_fits,
    with_day,
)


def version(vid: int, value: str, status: str, intervals: tuple[tuple[int, int | None], ...],
            supersedes: int | None = None, sources: tuple[str, ...] = ()) -> VersionView:
    return VersionView(vid, value, status, supersedes, None, intervals, 50, len(sources), sources, ())


def words(text: str) -> int:
    return len(text.split())


PB = CellView("default", "5k_pb", "25:50", "contested", ("24:59",), (
    version(1, "27:12", "superseded", ((1, 2),)),
    version(2, "25:50", "contested", ((2, None),), supersedes=1, sources=("race",)),
    version(3, "24:59", "alternative", ((3, None),), sources=("watch",)),
    version(4, "30:00", "revoked", ((4, 5),)),
))


def test_a_cell_renders_current_value_first_on_one_line() -> None:
    cell = CellView("default", "home_city", "Porto", "active")
    assert render_cell(cell) == "home_city = Porto"


def test_a_contested_cell_appends_its_alternatives_each_marked_with_source_and_trust() -> None:
    assert render_cell(PB) == "5k_pb = 25:50 (race, trust 50)  [contested: 24:59 (watch, trust 50)]"


def test_a_view_without_versions_renders_the_bare_form() -> None:
    cell = CellView("default", "room", "A", "contested", ("B",))
    assert render_cell(cell) == "room = A  [contested: B]"


def claim(vid: int, value: str, trust: int, source: str = "attacker", status: str = "alternative") -> VersionView:
    return VersionView(vid, value, status, None, None, ((vid, None),), trust, 0, (source,), ())


FLOODED = CellView("default", "iban", "DE89", "contested", tuple(f"EVIL{i}" for i in range(12)) + ("DE00",), (
    claim(0, "DE89", 90, "bank", "contested"), claim(1, "DE00", 90, "branch"),
    *(claim(i + 2, f"EVIL{i}", 10) for i in range(12))))


def test_alternatives_below_the_head_trust_are_counted_not_listed() -> None:
    assert render_cell(FLOODED) == ("iban = DE89 (bank, trust 90)  "
                                    "[contested: DE00 (branch, trust 90) | +12 lower-trust claims]")
    lines = render_cell(FLOODED, {"alternatives"}).splitlines()
    assert lines[1] == "  alternatives: DE00 (trust 90, support 0, sources: branch); +12 lower-trust claims"


def test_every_alternative_is_listed_when_asked_best_trust_first() -> None:
    line = render_cell(FLOODED, alternatives="all")
    assert line.count("(attacker, trust 10)") == 12 and "lower-trust" not in line
    assert line.index("DE00") < line.index("EVIL0")


def test_min_trust_leaves_out_the_versions_below_it() -> None:
    assert render_cell(FLOODED, min_trust=50) == "iban = DE89 (bank, trust 90)  [contested: DE00 (branch, trust 90)]"
    assert render_cell(FLOODED, min_trust=95) == "iban = (empty)"
    assert not readable(FLOODED, 95) and readable(FLOODED, 90) and readable(FLOODED, None)


def test_a_head_below_min_trust_is_not_shown_but_a_trusted_alternative_is() -> None:
    cell = CellView("default", "iban", "EVIL", "contested", ("DE89",),
                    (claim(0, "EVIL", 10, status="contested"), claim(1, "DE89", 90, "bank")))
    assert render_cell(cell, min_trust=50) == "iban = (no claim with trust >= 50)  [contested: DE89 (bank, trust 90)]"
    assert render_cell(cell) == "iban = EVIL (attacker, trust 10)  [contested: DE89 (bank, trust 90)]"


def test_one_lower_trust_claim_is_singular() -> None:
    cell = CellView("default", "k", "v", "contested", ("w",), (claim(0, "v", 60, "a", "contested"), claim(1, "w", 5)))
    assert render_cell(cell) == "k = v (a, trust 60)  [contested: +1 lower-trust claim]"


def test_history_lists_closed_versions_newest_first_with_status() -> None:
    lines = render_cell(PB, {"history"}).splitlines()
    assert lines[1] == "  history: 30:00 (revoked); 27:12 (superseded)"


def test_alternatives_and_support_disclose_trust_support_and_sources() -> None:
    lines = render_cell(PB, ["alternatives", "support"]).splitlines()
    assert lines[1] == "  alternatives: 24:59 (trust 50, support 1, sources: watch)"
    assert lines[2] == "  support: 1 (trust 50, sources: race)"


def test_the_gate_opens_for_questions_about_the_current_value() -> None:
    assert asks_current("Where is the mug now?")
    assert asks_current("What is my current 5K PB?")
    assert asks_current("Which city is the capital of France?")


def test_the_gate_stays_shut_for_the_past_and_for_aggregation() -> None:
    assert not asks_current("Where was the mug before?")
    assert not asks_current("How many times did I change my PB?")
    assert not asks_current("List every city I lived in")
    assert not asks_current("mug location")


TURNS = [Turn(1, "mug in cabinet", "mug", 1), Turn(2, "mug moved to desk", "mug", 2),
         Turn(3, "mug moved to shelf", "mug", 3), Turn(4, "pen in drawer", "pen", 1), Turn(5, "hello")]
SUPERSEDES = {("mug", 2): 1, ("mug", 3): 2}


def test_every_ancestor_of_a_retrieved_version_is_superseded_along_the_graph() -> None:
    assert superseded_turns(TURNS, SUPERSEDES) == {1, 2}
    assert superseded_turns([TURNS[0], TURNS[2]], SUPERSEDES) == {1}  # linked through a turn not retrieved


def test_pruning_removes_earlier_linked_turns_only_behind_the_gate() -> None:
    kept, pruned = prune_turns(TURNS, SUPERSEDES, "Where is the mug now?")
    assert [t.index for t in kept] == [3, 4, 5] and [t.index for t in pruned] == [1, 2]
    kept, pruned = prune_turns(TURNS, SUPERSEDES, "Where was the mug before?")
    assert kept == TURNS and pruned == []


def test_a_budget_keeps_the_leading_blocks_that_fit() -> None:
    assert fit_budget(["a b", "c d", "e"], 4, words) == ["a b", "c d"]
    assert fit_budget(["a b c"], 2, words) == []
    assert fit_budget(["a", "b"], None, words) == ["a", "b"]


def test_the_long_context_tail_is_the_longest_suffix_of_whole_lines_that_fits() -> None:
    assert tail_that_fits("one two\nthree\nfour five six", 4, words) == "three\nfour five six"
    assert tail_that_fits("x y z", 2, words) == ""


def test_a_read_result_reports_characters_and_tokens() -> None:
    r = ReadResult("q?", "cells", "a = 1\nb = 2", 8, ("a", "b"))
    assert r.chars == 11
    assert r.to_dict()["tokens"] == 8 and r.to_dict()["items"] == ["a", "b"]


# -- a wrong fact cannot prune the turn that answers ------------------------------------------------
JOB = Turn(1, "I started a new job as a Financial Analyst last week", source="Andrew (x:D1:1)",
           observed_at="2023-04-15T14:00:00", writes=(("andrew.personal_best_5k_time", 0, "2023-04-15"),))
EAGLES = Turn(6, "Eagles have always mesmerized me", source="Andrew (x:D1:6)",
              writes=(("andrew.personal_best_5k_time", 1, "never"),))
WRONG = {("andrew.personal_best_5k_time", 1): 0}


def test_a_turn_is_not_pruned_by_a_fact_its_superseder_does_not_ground() -> None:
    kept, pruned = prune_turns([EAGLES, JOB], WRONG, "What is Andrew's new job?")
    assert (kept, pruned) == ([EAGLES, JOB], [])  # the wrong cells are superseded, the job turn stays


def test_a_turn_is_not_pruned_when_the_fact_it_wrote_is_not_grounded_in_it() -> None:
    job = Turn(1, JOB.text, writes=(("andrew.job", 0, "Analyst at a bank"),))
    later = Turn(2, "My job is now chef.", writes=(("andrew.job", 1, "chef"),))
    assert superseded_turns([job, later], {("andrew.job", 1): 0}) == set()


def test_a_grounded_supersession_prunes_the_earlier_turn() -> None:
    porto = Turn(1, "My home city is now Porto.", writes=(("ann.home_city", 0, "Porto"),))
    braga = Turn(2, "My home city is now Braga.", writes=(("ann.home_city", 1, "Braga"),))
    kept, pruned = prune_turns([braga, porto], {("ann.home_city", 1): 0}, "What is Ann's home city now?")
    assert (kept, pruned) == ([braga], [porto])


def test_a_turn_that_still_supports_a_current_value_is_never_pruned() -> None:
    both = Turn(1, "My home city is Porto and my job is baker.",
                writes=(("ann.home_city", 0, "Porto"), ("ann.job", 0, "baker")))
    braga = Turn(2, "My home city is now Braga.", writes=(("ann.home_city", 1, "Braga"),))
    supersedes = {("ann.home_city", 1): 0}
    assert superseded_turns([both, braga], supersedes) == set()  # its job is not superseded
    only = Turn(1, "My home city is Porto.", writes=(("ann.home_city", 0, "Porto"),))
    assert superseded_turns([only, braga], supersedes, current={("ann.home_city", 0)}) == set()  # still open
    assert superseded_turns([only, braga], supersedes) == {1}


def test_a_turn_is_rendered_with_its_date_and_who_said_it() -> None:
    assert render_turn(JOB.text, JOB.source, JOB.observed_at) == (
        "[15 April 2023] Andrew (x:D1:1): I started a new job as a Financial Analyst last week")
    assert render_turn("hello") == "hello"
    assert render_turn("hello", None, "yesterday") == "[yesterday] hello"


def test_with_day_puts_a_line_after_the_day_of_an_iso_time_and_leaves_other_times_as_given() -> None:
    assert with_day("k = v", "2023-05-25T13:56:00") == "[25 May 2023] k = v"
    assert with_day("k = v", "2026-12-03T07:28:01.555078+00:00") == "[3 December 2026] k = v"
    assert with_day("k = v", "2023-05-08") == "[8 May 2023] k = v"
    assert with_day("k = v", "last spring") == "[last spring] k = v"
    assert with_day("k = v", None) == with_day("k = v", "") == "k = v"
