"""Reading model answers deterministically: every malformed shape gives facts or a reason, never an exception."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pmem.domain.extraction.llm_output import find_json_object, parse_facts, salvage_items
from tests.conftest import examples

GOOD = '{"facts": [{"key": "home city", "value": "Porto", "status": "asserted"}]}'


def test_a_plain_answer_gives_its_facts_with_normalised_keys() -> None:
    x = parse_facts(GOOD, 1, "My home city is Porto.")
    assert [(f.key, f.value, f.status, f.op_hint) for f in x.facts] == [("home_city", "Porto", "asserted", "accept")]
    assert not x.failed and x.dropped == ()


def test_a_node_type_from_the_model_is_kept_and_a_missing_one_is_left_to_the_rule() -> None:
    answer = json.dumps({"facts": [
        {"key": "ada.spouse", "value": "William King", "status": "asserted", "node_type": "relationship"},
        {"key": "ada.nickname", "value": "Enchantress", "status": "asserted"}]})
    assert [f.node_type for f in parse_facts(answer, 1, "t").facts] == ["relationship", None]


def test_an_unknown_node_type_drops_that_fact_and_says_why() -> None:
    answer = json.dumps({"facts": [
        {"key": "ada.spouse", "value": "William King", "status": "asserted", "node_type": "marriage"},
        {"key": "ada.nickname", "value": "Enchantress", "status": "asserted", "node_type": "persona"}]})
    x = parse_facts(answer, 1, "t")
    assert [f.key for f in x.facts] == ["ada.nickname"]
    assert x.dropped == ("fact 1 (key 'ada.spouse'): 'node_type' must be one of event, persona, relationship, "
                         "got 'marriage'",)


def test_the_schema_offers_exactly_the_three_node_types() -> None:
    from pmem.domain.extraction.llm_output import FACTS_SCHEMA

    item = FACTS_SCHEMA["properties"]["facts"]["items"]
    assert sorted(item["properties"]["node_type"]["enum"]) == ["event", "persona", "relationship"]
    assert "node_type" not in item["required"]


@pytest.mark.parametrize("wrapped", [
    f"```json\n{GOOD}\n```",
    f"```\n{GOOD}```",
    f"Sure! Here is {{the}} answer:\n```json\n{GOOD}\n```\nHope {{this}} helps.",
    f"I found {{one}} fact: {GOOD} -- done {{ok}}",
    f"```json\n{GOOD}",  # an unclosed fence
])
def test_fences_and_braces_inside_prose_are_read_through(wrapped: str) -> None:
    assert [f.key for f in parse_facts(wrapped, 1, "t").facts] == ["home_city"]


@pytest.mark.parametrize("output", [
    "", "no JSON here", '{"facts": [{"key": "home_city", "value": "Por', '{"fact": []}', '{"facts": "Porto"}',
    "{" * 5000, "[" * 100_000, '{"facts": [' + "{" * 20_000,
])
def test_unusable_answers_fail_with_a_reason_instead_of_raising(output: str) -> None:
    x = parse_facts(output, 3, "t")
    assert x.failed and x.reason and x.facts == ()


def test_an_invalid_escape_is_repaired_not_fatal() -> None:
    x = parse_facts(r'{"facts": [{"key": "path", "value": "C:\Users\q", "status": "asserted"}]}', 1, "t")
    assert [f.value for f in x.facts] == [r"C:\Users\q"]


def test_invented_fields_are_ignored_and_a_key_holding_its_value_is_dropped_with_a_reason() -> None:
    out = json.dumps({"facts": [
        {"key": "pb", "value": "25:50", "status": "asserted", "mood": "happy"},
        {"key": "personal_best_27_12", "value": "27:12", "status": "asserted"},
        {"key": "city", "value": "Porto", "status": "certain"},
    ], "commentary": "extra"})
    x = parse_facts(out, 1, "t")
    assert [f.key for f in x.facts] == ["pb"]
    assert len(x.dropped) == 2 and "contains its value" in x.dropped[0] and "unknown assertion" in x.dropped[1]


def test_a_one_megabyte_value_is_dropped_with_a_reason() -> None:
    out = json.dumps({"facts": [{"key": "blob", "value": "x" * 1_000_000, "status": "asserted"}]})
    x = parse_facts(out, 1, "t")
    assert x.facts == () and not x.failed and "over 64 KiB" in x.dropped[0]


def test_each_assertion_status_sets_its_op_hint_and_default_confidence() -> None:
    out = json.dumps({"facts": [{"key": f"k{i}", "value": "v", "status": s}
                                for i, s in enumerate(("asserted", "hedged", "reported", "withdrawn"))]})
    got = [(f.status, f.op_hint, f.confidence) for f in parse_facts(out, 1, "t").facts]
    assert got == [("asserted", "accept", 0.9), ("hedged", "contest", 0.5), ("reported", "accept", 0.7),
                   ("withdrawn", "revoke", 0.9)]


def test_an_empty_fact_list_is_no_facts_not_a_failure() -> None:
    x = parse_facts('{"facts": []}', 1, "t")
    assert not x.failed and x.facts == () and x.reason == "the model found no facts"


@pytest.mark.parametrize("output, items, repeats", [
    ('{"facts": [{"key": "a", "value": "1"}, {"key": "b", "va', [{"key": "a", "value": "1"}], 0),
    ('Sure: {"facts": [1, 2, 1, 1, 2, "x', [1, 2], 3),  # exact repeats once, in first-seen order
    ('```json\n{"facts": [{"key": "a", "value": "1"},\n  {"key": "a", "value": "1"},', [{"key": "a", "value": "1"}], 1),
])
def test_the_complete_items_of_a_cut_off_list_are_salvaged(output: str, items: list[object], repeats: int) -> None:
    assert salvage_items(output, "facts") == (items, repeats)


@pytest.mark.parametrize("output", ['{"facts": [', '{"facts": [{"key": "a"', '{"answer": [1, 2', "no list", ""])
def test_a_cut_off_list_without_a_complete_item_salvages_nothing(output: str) -> None:
    assert salvage_items(output, "facts") is None
    assert parse_facts(output, 1, "t").failed


def test_a_cut_off_answer_gives_its_complete_facts_and_says_the_rest_was_lost() -> None:
    fact = {"key": "city", "value": "Porto", "status": "asserted"}
    x = parse_facts('{"facts": [' + json.dumps(fact) + ", " + json.dumps(fact) + ', {"key": "ci', 4, "t")
    assert not x.failed and [(f.key, f.value) for f in x.facts] == [("city", "Porto")]
    assert x.dropped == ("the rest of the answer: it was cut off after 1 complete fact and 1 exact repeat (the model "
                         "stopped before closing its list)",)


def test_find_json_object_wants_the_required_field() -> None:
    assert find_json_object('{"a": 1} then {"op": "accept"}', "op")[0] == {"op": "accept"}

_PIECES = st.sampled_from(['{', '}', '[', ']', '"', '\\', ':', ',', '```json\n', '```', '"facts"', '"key"',
                           '"value"', '"status"', '"asserted"', '"hedged"', 'null', '1e999', '\\u12', ' ', '\n'])


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.one_of(_PIECES, st.text(max_size=8)), max_size=40).map("".join))
def test_any_answer_gives_facts_or_a_reason_and_never_raises(output: str) -> None:
    x = parse_facts(output, 1, "t")
    assert x.facts or x.reason
    assert all(f.key and f.value for f in x.facts)
