"""The pure rules of soft key identity (domain/extraction/key_identity.py): what merges, what never does, and why."""

from __future__ import annotations

import pytest

from pmem.domain.extraction.key_identity import (
    free_form,
    is_system_key,
    key_phrase,
    key_words,
    same_key,
    settled_without_judge,
)


@pytest.mark.parametrize(("a", "b"), [
    ("car", "automobile"),
    ("dentist_appointment", "appointment_with_the_dentist"),
    ("daily_step_goal", "step_goal_per_day"),
    ("favourite_colour", "favorite_color"),
    ("sister_s_birthday", "birthday_of_my_sister"),
    ("manager_s_manager", "manager_of_my_manager"),
    ("number_of_children", "children_count"),
    ("5k_pb", "personal_best_over_5_km"),
    ("france.capital", "france.capital_city"),
])
def test_synonyms_spellings_and_reorderings_merge(a: str, b: str) -> None:
    same, why = same_key(a, b)
    assert same, why
    assert why == "identical after normalisation and synonyms"
    assert settled_without_judge(a, b) == (True, why)  # settled: no judge is asked
    assert sorted(key_phrase(a).split()) == sorted(key_phrase(b).split())  # the shortlist embeds the same words


@pytest.mark.parametrize(("a", "b", "reason"), [
    ("manager_s_manager", "manager", "possessive chain"),
    ("managers_manager", "manager", "qualifies"),
    ("sister_s_birthday", "birthday", "possessive chain"),
    ("morning_run", "run", "qualifier: morning"),
    ("work_email", "email", "qualifier: work"),
    ("daily_step_goal", "step_goal", "qualifier: daily"),
    ("car", "first_car", "qualifies"),
    ("favorite_food", "least_favorite_food", "qualifies"),
    ("morning_run", "evening_run", "contrastive qualifier"),
    ("work_email", "personal_email", "contrastive qualifier"),
    ("sister_s_birthday", "brother_s_birthday", "contrastive qualifier"),
    ("daily_step_goal", "weekly_step_goal", "contrastive qualifier"),
    ("min_heart_rate", "max_heart_rate", "contrastive qualifier"),
    ("10k_pb", "5k_pb", "different numbers"),
    ("10k_pb", "10_mile_pb", "contrastive qualifier"),
    ("dog_s_owner", "owner_s_dog", "possessive runs the other way"),
    ("france.capital", "germany.capital", "different subjects"),
])
def test_a_key_never_merges_with_a_key_it_qualifies_or_contrasts_with(a: str, b: str, reason: str) -> None:
    for x, y in ((a, b), (b, a)):
        settled = settled_without_judge(x, y)
        assert settled is not None and settled[0] is False  # binding on every judge, a model's too
        assert reason in settled[1]
        assert same_key(x, y) == settled


def test_what_the_rules_leave_open_the_deterministic_judge_refuses_and_says_why() -> None:
    assert settled_without_judge("commute_time", "commute_duration") is None  # a model may decide
    same, why = same_key("commute_time", "commute_duration")
    assert not same and why == "different words (time / duration) with no synonym between them"


def test_the_qualifier_reason_names_the_longer_key_and_the_extra_words() -> None:
    assert same_key("manager", "manager_s_manager") == (
        False, "manager_s_manager qualifies manager (possessive chain: manager)")
    assert same_key("run", "morning_run") == (False, "morning_run qualifies run (qualifier: morning)")
    assert same_key("evening_run", "morning_run") == (False, "contrastive qualifier (evening / morning)")


def test_of_is_turned_round_and_a_possessive_fixes_the_order() -> None:
    assert key_words("birthday_of_my_sister") == (("sister", "birth", "date"), True)
    assert key_words("sister_s_birthday") == (("sister", "birth", "date"), True)
    assert key_words("appointment_with_the_dentist") == (("appointment", "dentist"), False)
    assert key_words("manager_of_the_manager_of_my_sister")[0] == ("sister", "manager", "manager")


def test_free_form_keys_are_statements_and_llm_facts_not_template_relations() -> None:
    assert free_form("statement") and free_form("llm")
    assert not free_form("cloze:P36") and not free_form("alfworld.move")


def test_system_keys_start_with_an_underscore() -> None:
    assert is_system_key("_alias.hometown") and is_system_key("_extraction.failed")
    assert not is_system_key("alias.hometown")
