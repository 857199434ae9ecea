"""The template extractor's third-person attribute form: "X's A is V" and "X's A changed from 'a' to 'b'"."""

from __future__ import annotations

import pytest

from pmem.domain.extraction.key_identity import free_form
from pmem.domain.extraction.template import DialogueTemplateExtractor, TemplateExtractor

X = TemplateExtractor()


@pytest.mark.parametrize(("text", "key", "value"), [
    ("Ada Byron's job title is director", "ada_byron.job_title", "director"),
    ("Ada Byron's monthly income is 15700 yuan.", "ada_byron.monthly_income", "15700 yuan"),
    ("Ada's birth date was 1986-03-26.", "ada.birth_date", "1986-03-26"),
    ("Ada Byron's home city is now Porto.", "ada_byron.home_city", "Porto"),
    ("Ada Byron's savings amount is $139,000.", "ada_byron.savings_amount", "$139,000"),
])
def test_a_named_subjects_attribute_statement_gives_subject_dot_attribute(text: str, key: str, value: str) -> None:
    (fact,) = X.extract(text, 4).facts
    assert (fact.key, fact.value, fact.status, fact.op_hint, fact.form, fact.node_type) == (
        key, value, "asserted", "accept", "attribute", "persona")


@pytest.mark.parametrize(("text", "key", "new", "old"), [
    ('Ada Byron\'s career_status updated job_title from "director" to "senior director" at Acme Ltd.',
     "ada_byron.job_title", "senior director", "director"),
    ("Ada Byron's mental health status changed from 'Mildly Abnormal' to 'Abnormal' due to stress.",
     "ada_byron.mental_health_status", "Abnormal", "Mildly Abnormal"),
    ('Ada\'s physical health status has changed from \u201cNormal\u201d to \u201cImproved\u201d.',
     "ada.physical_health_status", "Improved", "Normal"),
])
def test_a_quoted_change_writes_the_new_value_and_keeps_the_old_as_previous(text: str, key: str, new: str,
                                                                           old: str) -> None:
    (fact,) = X.extract(text, 1).facts
    assert (fact.key, fact.value, fact.previous, fact.form) == (key, new, old, "attribute.change")


@pytest.mark.parametrize("text", [
    "Ada Byron's motivation for accepting the promotion is driven by her wish to help.",  # a preposition
    "Ada Byron's dialogue was marked by a mix of concern and optimism.",  # a participle opens the value
    "Ada Byron's emotional state is one of curiosity.",  # a filler opens the value
    "Ada Byron's plan is to move to Lisbon next spring with her whole family.",  # too long: a clause
    "Ada Byron's reason is simple, she likes it.",  # a clause after a comma
    "Ada Byron's clothing preference changed from casual attire to smart-casual attire.",  # unquoted values
    "ada's job title is director",  # no capitalised name
])
def test_a_clause_about_someone_is_not_taken_for_a_value(text: str) -> None:
    result = X.extract(text, 2)
    assert result.facts == () and result.reason == "no template matched"


def test_the_cloze_templates_keep_their_relations_before_the_attribute_form() -> None:
    (fact,) = X.extract("Anna Lee's child is Bob Lee.", 1).facts
    assert (fact.key, fact.form) == ("anna_lee.child", "cloze:P40")


def test_dialogue_turns_still_read_only_the_first_person_form() -> None:
    assert DialogueTemplateExtractor().extract("Ada Byron's job title is director.", 1).facts == ()


def test_attribute_keys_are_worded_freely_so_soft_identity_checks_them() -> None:
    assert free_form("attribute") and free_form("attribute.change")
