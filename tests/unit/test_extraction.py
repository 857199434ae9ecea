"""The template extractor and the rule-based annotator: pure, so no store and no files."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pmem.domain.extraction.annotate import EMPTY, CellSnapshot, annotate
from pmem.domain.extraction.cloze import CLOZES, TEMPLATES, match_cloze
from pmem.domain.extraction.facts import Fact, subject_key
from pmem.domain.extraction.template import TemplateExtractor

X = TemplateExtractor()


def one(text: str) -> Fact:
    result = X.extract(text, 7)
    assert result.reason is None and len(result.facts) == 1, result
    (fact,) = result.facts
    assert fact.record == 7 and fact.text == text
    return fact


def test_a_numbered_cloze_line_gives_subject_dot_relation_and_the_object_verbatim() -> None:
    f = one("247. The capital of United States of America is Washington, D.C..")
    assert (f.key, f.value, f.status, f.op_hint, f.form) == (
        "united_states_of_america.capital", "Washington, D.C.", "asserted", "accept", "cloze:P36")


@pytest.mark.parametrize(("text", "node_type"), [
    ("Charles Dickens is married to Catherine Hogarth.", "relationship"),
    ("The author of Our Mutual Friend is Charles Dickens.", "relationship"),
    ("Charles Dickens was born in the city of Portsmouth.", "event"),
    ("The capital of France is Paris.", "persona"),
    ("Earlier observation: mug 1 was in cabinet 2.", "event"),
    ("Update: mug 1 has been moved from cabinet 2 to shelf 3.", "event"),
    ("My favourite colour is now green.", "persona"),
])
def test_every_template_fact_carries_a_graph_node_type(text: str, node_type: str) -> None:
    assert one(text).node_type == node_type


def test_the_most_specific_template_wins_over_the_generic_ones() -> None:
    assert one("The headquarters of Nokia is located in the city of Espoo.").key == "nokia.headquarters_city"
    assert one("The name of the current head of state in Peru is Anna.").key == "peru.head_of_state"
    assert one("Bengaluru is located in the continent of Asia.").key == "bengaluru.continent"
    assert one("Bengaluru is located in Karnataka.").key == "bengaluru.located_in"
    assert one("The Prime Minister of Spain is Pedro.").key == "prime_minister_of_spain.officeholder"


def test_misspelled_templates_are_matched_as_written() -> None:
    assert one("The univeristy where Lou Reed was educated is Syracuse University.").key == "lou_reed.educated_at"
    assert one("The origianl broadcaster of Friends is NBC.").key == "friends.original_broadcaster"


def test_keys_do_not_depend_on_the_value_and_fold_accents_and_dots() -> None:
    assert one("Zürich is a member of Eurocities.").key == one("Zurich is a member of UNESCO.").key
    assert subject_key("Apple Inc.", "developer") == "apple_inc.developer"
    assert subject_key("東京", "capital") == "東京.capital"  # edition 2: keys in any script
    assert subject_key("!!", "capital") == ""


def test_alfworld_observation_move_and_retraction_name_one_location_cell() -> None:
    seen = one("Earlier observation: mug 1 was in cabinet 2.")
    moved = one("Update: mug 1 has been moved from cabinet 2 to countertop 1.")
    wrong = one("The move of mug 1 to countertop 1 was reported in error.")
    assert {seen.key, moved.key, wrong.key} == {"mug_1.location"}
    assert (seen.value, seen.op_hint) == ("cabinet 2", "accept")
    assert (moved.value, moved.previous, moved.op_hint) == ("countertop 1", "cabinet 2", "accept")
    assert (wrong.value, wrong.status, wrong.op_hint) == ("countertop 1", "withdrawn", "revoke")


@pytest.mark.parametrize(("text", "key", "value", "status", "hint"), [
    ("My 5K PB is now 25:50.", "5k_pb", "25:50", "asserted", "accept"),
    ("the meeting room is now B12", "meeting_room", "B12", "asserted", "accept"),
    ("I think my dentist appointment is now Tuesday.", "dentist_appointment", "Tuesday", "hedged", "contest"),
    ("Maybe our wifi password is now hunter2", "wifi_password", "hunter2", "hedged", "contest"),
    ("My coach says my 5k pb is now 25:40.", "5k_pb", "25:40", "reported", "accept"),
    ("According to Anna, the meeting room is now C3.", "meeting_room", "C3", "reported", "accept"),
    ("Correction: my 5k pb is now 26:10", "5k_pb", "26:10", "asserted", "reject"),
    ("Actually, my home city is now Porto.", "home_city", "Porto", "asserted", "reject"),
    ("My favourite colour is no longer blue.", "favourite_colour", "blue", "withdrawn", "revoke"),
])
def test_personal_statements_carry_their_assertion_status(text: str, key: str, value: str, status: str,
                                                          hint: str) -> None:
    f = one(text)
    assert (f.key, f.value, f.status, f.op_hint, f.form) == (key, value, status, hint, "statement")


@pytest.mark.parametrize(("text", "reason"), [
    ("Here is a list of facts:", "no template matched"),
    ("", "empty record"),
    ("   ", "empty record"),
    ("Earlier observation: ¿¡ was in cabinet 2.", "alfworld.observation: the key is empty after normalisation"),
    ("We had pasta for lunch", "no template matched"),
])
def test_a_record_without_a_fact_says_why(text: str, reason: str) -> None:
    result = X.extract(text, 3)
    assert result.facts == () and result.reason == reason and result.record == 3


def test_there_are_44_templates_and_43_relations() -> None:
    assert len(TEMPLATES) == len(CLOZES) == 44
    assert len({r for _, r in TEMPLATES.values()}) == 43  # P131 and P276 share one wording


WORD = st.text(string.ascii_lowercase, min_size=2, max_size=8).map(str.capitalize).filter(
    lambda w: w not in ("The", "Now", "No", "Is"))
PHRASE = st.lists(WORD, min_size=1, max_size=4).map(" ".join)


@given(st.sampled_from(sorted(TEMPLATES)), PHRASE, PHRASE, st.integers(0, 10_000))
def test_every_template_round_trips_subject_relation_and_object(pid: str, subject: str, obj: str, n: int) -> None:
    template, relation = TEMPLATES[pid]
    line = f"{n}. " + template.replace("[X]", subject).replace("__", obj) + "."
    (fact,) = X.extract(line, 1).facts
    assert (fact.key, fact.value) == (subject_key(subject, relation), obj)
    found = match_cloze(line[len(f"{n}. "):-1])
    assert found is not None and found[0].relation == relation


# -- the annotator -------------------------------------------------------------
ACTIVE = CellSnapshot("cabinet 2", "active")
CONTESTED = CellSnapshot("cabinet 2", "contested", ("drawer 1",))


@pytest.mark.parametrize(("text", "cell", "op", "valid"), [
    ("Earlier observation: mug 1 was in cabinet 2.", EMPTY, "accept", True),
    ("Earlier observation: mug 1 was in cabinet 2.", ACTIVE, "support", True),
    ("Update: mug 1 has been moved from cabinet 2 to shelf 3.", ACTIVE, "accept", True),
    ("The move of mug 1 to cabinet 2 was reported in error.", ACTIVE, "revoke", True),
    ("The move of mug 1 to drawer 1 was reported in error.", CONTESTED, "revoke", True),
    ("The move of mug 1 to shelf 3 was reported in error.", ACTIVE, "revoke", False),
    ("The move of mug 1 to shelf 3 was reported in error.", EMPTY, "revoke", False),
    ("I think my mug is now in the sink.", ACTIVE, "contest", True),
    ("I think my mug is now in the sink.", EMPTY, "contest", False),
    ("Correction: my mug is now in the sink.", ACTIVE, "reject", True),
    ("Correction: my mug is now cabinet 2.", ACTIVE, "reject", False),
    ("Correction: my mug is now in the sink.", EMPTY, "reject", False),
    ("My coach says my mug is now in the sink.", ACTIVE, "accept", True),
])
def test_the_annotator_chooses_by_the_rules_and_validates_against_the_cell(text: str, cell: CellSnapshot, op: str,
                                                                          valid: bool) -> None:
    a = annotate(one(text), cell)
    assert (a.op, a.valid) == (op, valid), a
    assert a.why and (a.invalid is None) == valid


def test_low_confidence_contests_even_when_asserted() -> None:
    f = one("The capital of Peru is Lima.")
    weak = Fact(f.key, f.value, "asserted", "accept", 0.4, f.record, f.text, f.form)
    assert annotate(weak, CellSnapshot("Cusco", "active")).op == "contest"
    assert annotate(f, CellSnapshot("Cusco", "active")).op == "accept"


def test_cue_words_inside_a_value_are_not_cues() -> None:
    f = one("Prince is famous for No Longer at Ease.")
    assert annotate(f, EMPTY).op == "accept"
    plain = Fact("cup.location", "desk", "asserted", "accept", 0.9, 1, "cup at desk (retracted)", "llm")
    assert annotate(plain, CellSnapshot("desk", "active")).op == "revoke"  # another extractor's unmarked cue


# -- dialogue (LoCoMo turns) ----------------------------------------------------------------------
def test_the_dialogue_template_reads_each_statement_sentence_and_skips_questions_and_other_forms() -> None:
    from pmem.domain.extraction.template import DialogueTemplateExtractor

    x = DialogueTemplateExtractor().extract(
        "Guess what? My home city is now Porto! Is my job now teacher? The capital of France is Paris.", 7)
    assert [(f.key, f.value, f.form, f.record) for f in x.facts] == [("home_city", "Porto", "statement", 7)]
    none = DialogueTemplateExtractor().extract("The photo is from a forest near my hometown.", 8)
    assert none.facts == () and none.reason and "my X is now Y" in none.reason
    assert DialogueTemplateExtractor().extract("  ", 9).reason == "empty record"


def test_a_speakers_first_person_key_is_put_under_the_speaker() -> None:
    from pmem.domain.extraction.facts import speaker_key

    assert speaker_key("Caroline", "home_city") == "caroline.home_city"
    assert speaker_key("José M.", "5k_pb") == "jose_m.5k_pb"
    assert speaker_key("Caroline", "france.capital") == "france.capital"  # it names its own subject
    assert speaker_key("!!", "home_city") == "home_city"
