"""The scoring of the LoCoMo and HaluMem benchmarks (benchmarks/locomo.py, benchmarks/halumem.py) on made-up
inputs: token F1, the judge's grade, the update-stage verdicts, and what a HaluMem writer may see."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from benchmarks.halumem import GOLD_FIELDS, classify, read_verdict, update_values, writer_points
from benchmarks.locomo import locomo_f1, normalize_answer, parse_sessions, read_grade, summary, token_f1


def test_answers_are_normalised_as_locomo_does_before_tokens_are_compared() -> None:
    assert normalize_answer("The Sunset, and a Lake!") == "sunset lake"
    assert token_f1("the lake", "Lake") == 1.0
    assert token_f1("a red car", "red bike") == pytest.approx(0.5)
    assert token_f1("", "red") == 0.0 and token_f1("blue", "red") == 0.0


def test_multi_hop_answers_are_lists_and_open_domain_keeps_the_first_alternative() -> None:
    assert locomo_f1("painting, running", "running, painting", 1) == 1.0
    assert locomo_f1("painting", "running, painting", 1) == pytest.approx(0.5)
    assert locomo_f1("Sweden", "Sweden; maybe Norway", 3) == 1.0
    assert locomo_f1("Sweden", "Sweden; maybe Norway", 4) < 1.0


def test_a_grade_is_read_only_when_the_judge_says_one_word_of_the_two() -> None:
    assert read_grade("CORRECT") is True and read_grade("Wrong.") is False
    assert read_grade("correct or wrong") is None and read_grade("maybe") is None
    assert read_verdict("Hallucination") == "hallucination" and read_verdict("correct, omission") is None


def test_sessions_are_ranges_lists_or_all() -> None:
    assert parse_sessions("1-3,6") == {1, 2, 3, 6} and parse_sessions("all") is None
    with pytest.raises(SystemExit, match="1-x"):
        parse_sessions("1-x")


def test_the_summary_gives_each_arm_its_categories_and_all() -> None:
    rows = [{"arm": "cells", "category": "temporal", "in_context": True, "tokens": 10, "f1": 1.0, "judged": True},
            {"arm": "cells", "category": "single-hop", "in_context": False, "tokens": 30, "f1": 0.0, "judged": None}]
    table = {(r["arm"], r["category"]): r for r in summary(rows)}
    assert table["cells", "all"] == {"arm": "cells", "category": "all", "questions": 2, "answer in context": 0.5,
                                     "F1": 0.5, "judged": 1.0, "mean tokens": 20.0}


@pytest.mark.parametrize(("context", "verdict"), [
    ("ada_byron.job_title = senior director", "correct"),
    ("ada_byron.job_title = director", "hallucination"),
    ("ada_byron.job_title = director\nada_byron.title = senior director", "hallucination"),
    ("ada_byron.employer = Acme", "omission"),
    ("ada_byron.manager_title = director\nada_byron.job_title = senior director", "correct"),
])
def test_an_update_is_correct_omitted_or_hallucinated_by_value_overlap(context: str, verdict: str) -> None:
    old, new, attribute = update_values(
        'Ada Byron\'s career_status updated job_title from "director" to "senior director" at Acme.', ["x"])
    assert (old, new, attribute) == ("director", "senior director", "job title")
    assert classify(context, old, new, attribute) == verdict


def test_a_descriptive_update_is_scored_against_its_original_memories() -> None:
    old, new, attribute = update_values("Ada now likes horror films for their suspense.",
                                        ["Ada dislikes horror films.", "Ada's mood changed from 'low' to 'calm'"])
    assert (old, attribute) == ("Ada dislikes horror films. calm", "")
    assert classify("ada.dislikes = horror films\nada.mood = calm", old, new) == "hallucination"
    assert classify("ada.now_likes = horror films for their suspense", old, new) == "correct"
    assert classify("ada.pet = cat", old, new) == "omission"


class Guarded(Mapping[str, Any]):
    """A memory point that fails the test when a gold update field is read in any way."""

    def __init__(self, **fields: Any) -> None:
        self.fields = fields

    def __getitem__(self, key: str) -> Any:
        assert key not in GOLD_FIELDS, f"the writer read {key!r}"
        return self.fields[key]

    def __iter__(self) -> Iterator[str]:
        raise AssertionError("the writer listed every field of a point")

    def __len__(self) -> int:
        return len(self.fields)


def test_the_writer_gets_text_and_time_only_and_never_interference_points() -> None:
    points = [Guarded(index=1, memory_content="Ada's job title is director", timestamp="Jan 15, 2029, 16:15:20",
                      memory_source="secondary", is_update="True", original_memories=["secret"]),
              Guarded(index=2, memory_content="Ada is a pilot", timestamp="Jan 15, 2029, 16:15:20",
                      memory_source="interference", is_update="False", original_memories=[])]
    assert writer_points(points) == [
        {"index": 1, "memory_content": "Ada's job title is director", "timestamp": "Jan 15, 2029, 16:15:20"}]
