"""Grounding and attribution through the real litellm and a real local chat server, on conversations of LoCoMo's shape.

The answers replayed are the kinds a small model gives: a leaked example key, a value nobody said, a fact
about the listener, a question read as a fact, next to the right facts. Only the right ones may be written;
every other candidate is on a receipt (and in the log) with its reason; a turn of only questions, greetings
and reactions is not sent to the model at all. Then turn-mode reading of the same store: the turn that
answers is there, with its speaker and date.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pmem
from pmem.adapters.llm.client import LlmSettings
from pmem.adapters.llm.extractor import LlmExtractor
from pmem.adapters.service.ingest import FAILURE_KEY, TURN_KEY, Ingestor
from pmem.adapters.sources.records import read_records
from pmem.domain.extraction.facts import Extraction
from pmem.domain.extraction.grounding import Utterance
from tests.chat_server import chat_server

SIX_TURNS = Path(__file__).resolve().parents[2] / "tests" / "data" / "locomo_invented_six_turns.json"
"""Six turns the project wrote itself in LoCoMo's shape: a new job, a reaction, a question, pets' names and
how long, a question, a liking; the kinds of turn a small model once wrote six wrong cells from."""


def answer(*facts: tuple[str, str, str, str]) -> str:
    return json.dumps({"facts": [{"subject": s, "attribute": a, "value": v, "evidence": e} for s, a, v, e in facts]})


def conversation(sample_id: str, when: str, *turns: tuple[str, str]) -> dict[str, Any]:
    """One session between Nora and Iker in LoCoMo's shape: ``(speaker, text)`` turns, numbered D1:1, D1:2, ..."""
    session = [{"speaker": who, "dia_id": f"D1:{n}", "text": text} for n, (who, text) in enumerate(turns, 1)]
    return {"sample_id": sample_id, "conversation": {"speaker_a": "Nora", "speaker_b": "Iker",
                                                     "session_1_date_time": when, "session_1": session}}


class Replay:
    """One LlmExtractor per record number, each asking a real OpenAI-compatible server on 127.0.0.1
    (tests/chat_server.py) under a model name of its own, which answers it the recorded answers in turn
    (the last one again for a retry); a record missing from the script must not reach a model."""

    name = "llm"

    def __init__(self, answers: dict[int, Sequence[str]], base: str) -> None:
        self.answers = {f"record-{n}": list(a) for n, a in answers.items()}
        # verify=False, slots="off": these tests are about the grounding rules of the free-form pass; the
        # verification pass and the slot card have their own tests
        self.extractors = {n: LlmExtractor(LlmSettings(f"openai/record-{n}", base), verify=False, slots="off")
                           for n in answers}
        self.never = LlmExtractor(LlmSettings("openai/never", base, attempts=1), verify=False, slots="off")

    def reply(self, request: dict[str, Any]) -> str:
        queue = self.answers.get(request["model"], ["not asked"])
        return queue.pop(0) if len(queue) > 1 else queue[0]

    def extract(self, text: str, record: int, said: Utterance | None = None) -> Extraction:
        return self.extractors.get(record, self.never).extract(text, record, said)


INVENTED = conversation(
    "inv", "10:05 am on 3 March, 2024",
    ("Nora", "I started a new job as a nurse at the city hospital last month."),
    ("Iker", "Congrats on the new job!"),
    ("Iker", "Thanks for asking! My cats are Miso and Tofu, I've had them for 2 years."),
    ("Nora", "Sweet names! Do you have a favorite bird?"),
    ("Iker", "Herons have always fascinated me."))
"""A conversation the project wrote itself, in LoCoMo's shape (not LoCoMo text)."""

RECORDED = {
    1: [answer(("Nora", "personal_best_5k_time", "2024-02-01", "last month"),
               ("I", "job", "nurse at the city hospital", "a new job as a nurse at the city hospital"))],
    3: [answer(("Iker", "cat_names", "Miso and Tofu", "My cats are Miso and Tofu"),
               ("Nora", "cats", "Miso and Tofu", "My cats are Miso and Tofu"),
               ("Iker", "personal_best_5k_time", "2 years", "I've had them for 2 years"))],
    5: [answer(("Iker", "favorite_bird", "parrot", "Herons have always fascinated me"),
               ("Iker", "favorite_bird", "Herons", "Herons have always fascinated me"))],
}


def ingest(store: pmem.Store, doc: dict[str, Any], answers: dict[int, Sequence[str]]) -> tuple[list[dict[str, Any]],
                                                                                             Replay]:
    late: list[Replay] = []  # the server starts first: the extractors need its address
    with chat_server(lambda request: late[0].reply(request)) as server:
        replay = Replay(answers, server.base)
        late.append(replay)
        return list(Ingestor(store, replay).run(read_records(json.dumps(doc).encode(), "locomo"))), replay


def why_dropped(receipts: list[dict[str, Any]]) -> list[tuple[int, str]]:
    """(record, reason) of each dropped candidate's receipt, the reason without its "dropped fact N (key 'k')"."""
    return sorted((r["record"], r["reason"].split(": ", 1)[1]) for r in receipts if r["key"] == FAILURE_KEY)


def why_logged(store: pmem.Store) -> set[str]:
    """The reasons of the dropped candidates in the log, cut as :func:`why_dropped` cuts them."""
    return {e["reason"].split(": ", 1)[1] for e in store.log() if e["key"] == FAILURE_KEY}


def test_only_grounded_facts_attributed_to_their_speaker_are_written(store: pmem.Store) -> None:
    receipts, replay = ingest(store, INVENTED, RECORDED)
    assert {c.key: c.value for c in store.frontier()} == {
        "nora.job": "nurse at the city hospital", "iker.cat_names": "Miso and Tofu", "iker.favorite_bird": "Herons"}
    assert replay.never.model.calls == 0  # the greeting and the question turn never reached a model
    said = {r["record"]: r["reason"] for r in receipts if r["key"] == TURN_KEY}
    assert said == {2: "no statement in the record (only a greeting or reaction)",
                    4: "no statement in the record (only a question, a reaction)"}
    assert all(r["event_index"] is not None for r in receipts)  # turns without facts are in the log, to read
    dropped = sorted((r["record"], r["reason"]) for r in receipts if r["key"] == FAILURE_KEY)
    assert dropped == [
        (1, "dropped fact 1 (key 'personal_best_5k_time'): ungrounded: attribute 'personal_best_5k_time' names "
            "the number 5, which the record does not have"),
        (3, "dropped fact 2 (key 'cats'): misattributed: the fact is about the listener 'Nora', not said by "
            "them (said by Iker)"),
        (3, "dropped fact 3 (key 'personal_best_5k_time'): ungrounded: attribute 'personal_best_5k_time' names "
            "the number 5, which the record does not have"),
        (5, "dropped fact 1 (key 'favorite_bird'): ungrounded: the value's words are not in the record"),
    ]
    logged = {e["reason"] for e in store.log() if e["key"] == FAILURE_KEY}
    assert logged == {reason for _, reason in dropped}  # every dropped candidate is in the log as well


def test_six_turns_replayed_with_answers_that_would_write_six_wrong_cells_write_none_of_them(
        store: pmem.Store) -> None:
    """The wrong answers a small model gives on such turns, replayed next to the right ones."""
    doc = json.loads(SIX_TURNS.read_text())
    wrong_and_right = {
        1: [answer(("Pia", "personal_best_5k_time", "2024-06-04", "last week"),
                   ("I", "job", "bakery manager", "a new job as a bakery manager"))],
        4: [answer(("Marek", "personal_best_5k_time", "4 years", "I've had them for 4 years!"),
                   ("Marek", "pet_names", "Juniper, Basil and Clover", "They are called Juniper, Basil and Clover"))],
        6: [answer(("Pia", "personal_best_5k_time", "never", "Oaks have always amazed me"),
                   ("Pia", "favorite_tree", "Oaks", "Oaks have always amazed me"))],
    }
    receipts, replay = ingest(store, doc, wrong_and_right)
    cells = {c.key: c.value for c in store.frontier()}
    assert cells == {"pia.job": "bakery manager", "marek.pet_names": "Juniper, Basil and Clover",
                     "pia.favorite_tree": "Oaks"}
    # the wrong answers above, and what the turns records 2, 3 and 5 would give if they reached a model
    for key, value in [("pia.personal_best_5k_time", "2024-06-04"), ("marek.new_job", "Congrats on the new job!"),
                       ("marek.personal_best_5k_time", "4 years"), ("pia.name", "Lovely little fellows"),
                       ("marek.favorite_kind_of_tree", "oak"), ("pia.personal_best_5k_time", "never")]:
        assert cells.get(key) != value and store.get(key).value is None
    assert replay.never.model.calls == 0  # the reaction and the two questions never reached a model
    assert {r["record"] for r in receipts} == set(range(1, 7))

    read = store.read("What is Pia's new job?", mode="turns", k=3)
    assert read.context.splitlines()[0] == (
        "[12 June 2024] Pia (six-turns:D1:1): I started a new job as a bakery manager last week")
    assert read.pruned == ()


MOODS = conversation(
    "moods", "6:30 pm on 9 March, 2024",
    ("Nora", "I'm so happy today! I moved to Lisbon last week and I teach chemistry at a high school."),
    ("Iker", "I totally agree, Nora, moving is hard. Your words mean a lot to me. I'll keep sharing my story "
             "to give others hope. I play the cello in a small orchestra."))
"""A conversation the project wrote itself, in LoCoMo's shape, for the durable-fact rules."""


def test_moods_thanks_agreement_sentences_and_paraphrases_are_not_written(store: pmem.Store) -> None:
    """The kinds of answer the local model gave on LoCoMo, next to the right facts."""
    mood_answers = {
        1: [answer(("Nora", "happiness", "happy", "I'm so happy today!"),
                   ("I", "home", "Lisbon", "I moved to Lisbon last week"),
                   ("I", "job", "teach chemistry at a high school", "I teach chemistry at a high school"),
                   ("Nora", "move", "I moved to Lisbon last week", "I moved to Lisbon last week"))],
        2: [answer(("Iker", "agree", "I totally agree", "I totally agree"),
                   ("Iker", "give_others_hope", "Iker gives others hope", "to give others hope"),
                   ("Iker", "i_ll_keep_sharing_my_story_with_everyone", "give others hope",
                    "I'll keep sharing my story to give others hope"),
                   ("Iker", "addressed", "Nora", "I totally agree, Nora"),
                   ("I", "instrument", "cello", "I play the cello in a small orchestra"))],
    }
    receipts, _ = ingest(store, MOODS, mood_answers)
    assert {c.key: c.value for c in store.frontier()} == {
        "nora.home": "Lisbon", "nora.job": "teach chemistry at a high school", "iker.instrument": "cello"}
    dropped = why_dropped(receipts)
    assert dropped == [
        (1, "not durable: attribute 'happiness' names a feeling or reaction (happiness)"),
        (1, "not durable: the value is a first- or second-person clause"),
        (2, "not durable: attribute 'agree' names a feeling or reaction (agree)"),
        (2, "not durable: attribute 'i_ll_keep_sharing_my_story_with_everyone' is a phrase, not a slot name"),
        (2, "not durable: the value is the listener's name (a form of address)"),
        (2, "ungrounded: the value's words are not in the record"),  # "Iker gives others hope": Iker is not said
    ]


SLOTS = conversation(
    "slots", "9:15 am on 16 March, 2024",
    ("Nora", "Last Saturday I ran a charity race with my husband and our two boys. Family time is the best."),
    ("Iker", "I work as a sound engineer, I still play my old guitar, and next month I'm going camping by the lake."))
"""A conversation the project wrote itself, in LoCoMo's shape, for the typed slots."""


def test_a_value_of_another_kind_than_its_slot_is_not_written_and_the_receipt_says_so(store: pmem.Store) -> None:
    """The kinds of answer the local model gave on LoCoMo sessions 1-5: an event or an activity under `work`,
    an outing or a remark under `family`, a value that only repeats its key; next to the right facts."""
    slot_answers = {
        1: [answer(("I", "work", "charity race", "I ran a charity race"),
                   ("I", "family", "Family time", "Family time is the best."),
                   ("I", "family", "husband and our two boys", "with my husband and our two boys"),
                   ("I", "events", "charity race", "I ran a charity race"))],
        2: [answer(("I", "family", "camping", "I'm going camping by the lake"),
                   ("I", "job", "sound engineer", "I work as a sound engineer"),
                   ("I", "old_guitar", "my old guitar", "I still play my old guitar"),
                   ("I", "plans", "camping by the lake", "next month I'm going camping by the lake"))],
    }
    receipts, _ = ingest(store, SLOTS, slot_answers)
    assert {c.key: c.value for c in store.frontier()} == {
        "nora.family": "husband and our two boys", "nora.events": "charity race",
        "iker.job": "sound engineer", "iker.plans": "camping by the lake"}
    dropped = why_dropped(receipts)
    assert dropped == [
        (1, "wrong type: a family slot's value names family members; 'Family time' names none"),
        (1, "wrong type: a job slot's value names a role, a workplace or an employer; 'charity race' does not"),
        (2, "wrong type: a family slot's value names family members; 'camping' names none"),
        (2, "wrong type: the value 'my old guitar' only repeats its attribute"),
    ]
    assert why_logged(store) == {reason for _, reason in dropped}


CUT = conversation(
    "cut", "8:40 pm on 20 March, 2024",
    ("Nora", "I'm swamped with the kids and my studies this week. Gonna continue my edu next year."),
    ("Iker", "Adopting is a big step. Creating a family for those kids is so lovely."))
"""A conversation the project wrote itself, in LoCoMo's shape, for an answer cut off mid-list."""


def test_an_answer_cut_off_mid_list_keeps_its_complete_facts_and_the_receipt_says_what_was_lost(
        store: pmem.Store) -> None:
    """A small model repeating one fact until it runs out of tokens (LoCoMo sessions 1-3 gave two such answers):
    its complete facts go through the same rules, and the cut is on the receipt; so are a value that only
    abbreviates its key and a speaker's "family" that is the listener's."""
    kids, edu, loop = (json.dumps({"subject": "I", "attribute": a, "value": v, "evidence": e})
                       for a, v, e in [("family", "kids", "swamped with the kids"),
                                       ("education", "edu", "continue my edu"),
                                       ("work", "work", "my studies")])
    cut_off = '{"facts": [' + ", ".join([kids, edu] + [loop] * 30) + ', {"subject": "I", "attri'
    answers = {
        1: [cut_off],
        2: [answer(("I", "family", "kids", "Creating a family for those kids is so lovely."),
                   ("I", "family", "creating a family for those kids", "Creating a family for those kids"))],
    }
    receipts, _ = ingest(store, CUT, answers)
    assert {c.key: c.value for c in store.frontier()} == {"nora.family": "kids"}
    dropped = why_dropped(receipts)
    assert dropped == [
        (1, "fact key 'work' contains its value"),
        (1, "it was cut off after 3 complete facts and 29 exact repeats (the model stopped before closing its list)"),
        (1, "wrong type: the value 'edu' only repeats its attribute"),
        (2, "misattributed: the family in 'kids' is someone else's, not the speaker's"),
        (2, "wrong type: a family slot's value names family members; 'creating a family for those kids' names none"),
    ]
    assert why_logged(store) == {reason for _, reason in dropped}
