"""The pre-write conflict rules (pure): numerical, semantic (rule or judge), logical."""

from __future__ import annotations

from pmem.projections.conflicts import Neighbour, check


def kinds(result: object) -> list[str]:
    return [c.kind for c in result.conflicts]  # type: ignore[attr-defined]


def test_numbers_of_the_same_key_that_differ_beyond_the_tolerance_conflict() -> None:
    r = check("user.weight", "48 kg", [Neighbour("user.weight", "42 kg")])
    assert kinds(r) == ["numerical"] and "differ by more than 5%" in r.conflicts[0].reason


def test_numbers_within_the_tolerance_or_in_other_units_do_not_conflict() -> None:
    assert check("user.weight", "42.5 kg", [Neighbour("user.weight", "42 kg")]).conflicts == ()
    assert check("user.weight", "93 lb", [Neighbour("user.weight", "42 kg")]).conflicts == ()


def test_a_value_that_negates_the_head_is_a_semantic_conflict_by_rule() -> None:
    assert kinds(check("user.diet", "not vegan", [Neighbour("user.diet", "vegan")])) == ["semantic"]
    assert kinds(check("door.state", "closed", [Neighbour("door.state", "open")])) == ["semantic"]
    assert check("user.diet", "pescatarian", [Neighbour("user.diet", "vegan")]).conflicts == ()


class Strict:
    """A small real judge: any two values of one subject that differ conflict."""

    def judge(self, key: str, value: str, other_key: str, other_value: str) -> tuple[bool, str]:
        same = key.split(".")[0] == other_key.split(".")[0] and value != other_value
        return same, f"{key}={value} vs {other_key}={other_value}"


def test_a_configured_judge_decides_semantic_conflict_instead_of_the_rule() -> None:
    r = check("user.diet", "pescatarian", [Neighbour("user.diet", "vegan"), Neighbour("car.colour", "red")],
              judge=Strict())
    assert kinds(r) == ["semantic"] and r.conflicts[0].key == "user.diet"


def test_declared_mutually_exclusive_values_are_a_logical_conflict() -> None:
    r = check("user.favourite_food", "Steak", [Neighbour("user.diet", "vegan")],
              exclusive=[("user.diet=vegan", "user.favourite_food=steak")])
    assert kinds(r) == ["logical"]


def test_a_conflict_lowers_confidence_below_0_6_and_turns_the_write_into_a_contest() -> None:
    clean = check("user.diet", "vegan", [Neighbour("user.diet", "vegan")])
    assert clean.confidence == 0.9 and not clean.contest
    r = check("user.diet", "not vegan", [Neighbour("user.diet", "vegan")])
    assert r.confidence < 0.6 and r.contest


def test_only_the_five_nearest_neighbours_are_compared() -> None:
    far = [Neighbour(f"k{i}", "x") for i in range(5)] + [Neighbour("user.diet", "vegan")]
    assert check("user.diet", "not vegan", far).conflicts == ()


def test_the_llm_judges_answer_is_read_from_json_even_inside_code_fences() -> None:
    from pmem.adapters.llm.judge import parse_verdict

    assert parse_verdict('```json\n{"conflict": true, "reason": "vegans eat no steak"}\n```') == (
        True, "vegans eat no steak")
    assert parse_verdict('{"conflict": false}')[0] is False


def test_an_llm_answer_out_of_form_is_an_error_never_a_silent_pass() -> None:
    import pytest

    from pmem.adapters.llm.judge import parse_verdict
    from pmem.domain.errors import JudgeUnavailable

    for bad in ("sure, they conflict", '{"conflict": "yes"}'):
        with pytest.raises(JudgeUnavailable, match="conflict judge answered"):
            parse_verdict(bad)
