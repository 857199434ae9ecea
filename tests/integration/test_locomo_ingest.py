"""LoCoMo conversations through ingest (``--format locomo``): one record per dialogue turn, with its
speaker, its session's time as evidence time and ``<sample_id>:<dia_id>`` as source; every turn ends as
facts or as a receipt saying why it gave none; a file of the wrong shape is one line naming where."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import pmem
from pmem.adapters.llm.client import LlmSettings
from pmem.adapters.llm.extractor import LlmExtractor
from pmem.adapters.service.ingest import FAILURE_KEY, TURN_KEY, Ingestor, make_extractor
from pmem.adapters.sources.records import read_records
from pmem.domain.errors import InvalidOperation
from tests.chat_server import Script, chat_server
from tests.conftest import ROOT

# LoCoMo itself (CC BY-NC) stays outside the repository: this is the project's own invented dialogue in
# its JSON shape (tests/data/README.md); the benchmarks (benchmarks/) read the real conversations.
LOCOMO = ROOT / "tests" / "data" / "locomo_invented.json"


def conversation(**sessions: Any) -> dict[str, Any]:
    return {"sample_id": "mini", "conversation": {"speaker_a": "Ann", "speaker_b": "Bo", **sessions},
            "qa": [{"question": "Where does Ann live?", "answer": "Braga"}]}


MINI = [conversation(
    session_2_date_time="9:05 am on 2 June, 2023",
    session_2=[
        {"speaker": "Ann", "dia_id": "D2:1", "text": "Hi again! Actually, my home city is now Braga."},
        {"speaker": "Bo", "dia_id": "D2:2", "text": "Look at this!", "img_url": ["http://x"],
         "blip_caption": "a photo of a dog"},
    ],
    session_1_date_time="1:56 pm on 8 May, 2023",
    session_1=[
        {"speaker": "Ann", "dia_id": "D1:1", "text": "Guess what? My home city is now Porto. The move was long."},
        {"speaker": "Bo", "dia_id": "D1:2", "text": "The weather is lovely there, I hear."},
        {"speaker": "Bo", "dia_id": "D1:3", "text": "My job is now teacher!"},
        {"speaker": "Ann", "dia_id": "D1:4", "text": ""},
    ],
)]


def mini_bytes() -> bytes:
    return json.dumps(MINI).encode()


def test_each_turn_becomes_a_record_in_session_order_with_speaker_source_and_session_time() -> None:
    records = list(read_records(mini_bytes(), "locomo"))
    assert [(r.number, r.source, r.speaker, r.observed_at) for r in records] == [
        (1, "Ann (mini:D1:1)", "Ann", "2023-05-08T13:56:00"),
        (2, "Bo (mini:D1:2)", "Bo", "2023-05-08T13:56:00"),
        (3, "Bo (mini:D1:3)", "Bo", "2023-05-08T13:56:00"),
        (4, "Ann (mini:D1:4)", "Ann", "2023-05-08T13:56:00"),
        (5, "Ann (mini:D2:1)", "Ann", "2023-06-02T09:05:00"),
        (6, "Bo (mini:D2:2)", "Bo", "2023-06-02T09:05:00"),
    ]
    assert records[5].text == "Look at this!"  # the image caption is not what Bo said


def test_each_turn_knows_the_turn_before_it_in_its_session_and_a_session_starts_afresh() -> None:
    records = list(read_records(mini_bytes(), "locomo"))
    assert [r.replying_to for r in records] == [
        None,  # the first turn of session 1
        "Ann: Guess what? My home city is now Porto. The move was long.",
        "Bo: The weather is lovely there, I hear.",
        "Bo: My job is now teacher!",  # an empty turn answers the last turn that said something
        None,  # session 2 starts afresh
        "Ann: Hi again! Actually, my home city is now Braga."]


def test_ingesting_a_conversation_keeps_each_speakers_statements_apart_and_accounts_for_every_turn(
        store: pmem.Store) -> None:
    receipts = list(Ingestor(store, make_extractor("template", fmt="locomo"), source="mini.json")
                    .run(read_records(mini_bytes(), "locomo")))
    assert {r["record"] for r in receipts} == {1, 2, 3, 4, 5, 6}
    assert {r["record"]: (r["key"], r["op"], r["speaker"], r["source"]) for r in receipts} == {
        1: ("ann.home_city", "accept", "Ann", "Ann (mini:D1:1)"),
        2: (TURN_KEY, "noop", "Bo", "Bo (mini:D1:2)"),  # a turn without facts is recorded as said
        3: ("bo.job", "accept", "Bo", "Bo (mini:D1:3)"),
        4: (None, "noop", "Ann", "Ann (mini:D1:4)"),  # an empty turn: nothing to read, so no event
        5: ("ann.home_city", "reject", "Ann", "Ann (mini:D2:1)"),  # "Actually, ..." is a correction cue
        6: (TURN_KEY, "noop", "Bo", "Bo (mini:D2:2)"),
    }
    assert [r["record"] for r in receipts if r["event_index"] is None] == [4]
    for r in receipts:
        if r["key"] in (TURN_KEY, None):
            assert not r["applied"] and r["reason"]
    unfactual = [e for e in store.log() if e["key"] == TURN_KEY]
    assert [(e["source"], e["observed_at"], e["text"]) for e in unfactual] == [
        ("Bo (mini:D1:2)", "2023-05-08T13:56:00", "The weather is lovely there, I hear."),
        ("Bo (mini:D2:2)", "2023-06-02T09:05:00", "Look at this!")]
    assert TURN_KEY not in {c.key for c in store.frontier()}  # the cell never has a head
    assert store.get("ann.home_city").value == "Braga" and store.get("bo.job").value == "teacher"
    event = store.log()[0]
    assert (event["source"], event["observed_at"], event["text"]) == (
        "Ann (mini:D1:1)", "2023-05-08T13:56:00", MINI[0]["conversation"]["session_1"][0]["text"])


def test_the_llm_extractor_reads_a_turn_and_its_first_person_key_becomes_the_speakers(store: pmem.Store) -> None:
    answer = json.dumps({"facts": [{"key": "home_city", "value": "Porto", "status": "asserted"},
                                   {"key": "porto.country", "value": "Portugal", "status": "asserted"}]})
    script = Script()
    with chat_server(script) as server:  # a real OpenAI-compatible server on 127.0.0.1 giving that answer
        extractor = LlmExtractor(LlmSettings(f"openai/{script.add('qwen', answer)}", server.base),
                                 verify=False, slots="off")  # one scripted answer: no verification, no slot card
        (first, *_) = read_records(mini_bytes(), "locomo")
        receipts = list(Ingestor(store, extractor).run([first]))
    (sent,) = server.requests  # one call, and it carried the turn's words
    assert first.text and first.text in "\n".join(m["content"] for m in sent["messages"])
    assert [(r["key"], r["op"]) for r in receipts] == [(FAILURE_KEY, "noop"), ("ann.home_city", "accept")]
    assert receipts[0]["reason"] == ("dropped fact 2 (key 'porto.country'): ungrounded: the value's words are not in "
                                     "the record")  # nobody said Portugal


BAD: list[tuple[bytes, str]] = [
    (b"[{]", "locomo: not JSON"),
    (b'[{"sample_id": "s"}]', "locomo: sample 1: expected an object with a 'conversation' object"),
    (json.dumps([conversation()]).encode(), "locomo: sample 1 (mini): the conversation has no session_<n> lists"),
    (json.dumps([conversation(session_1=[])]).encode(),
     "locomo: sample 1 (mini): session_1 has no session_1_date_time string"),
    (json.dumps([conversation(session_1_date_time="last Tuesday", session_1=[])]).encode(),
     "locomo: sample 1 (mini): session_1_date_time 'last Tuesday' is neither"),
    (json.dumps([conversation(session_1_date_time="2023-05-08T13:56", session_1={"a": 1})]).encode(),
     "locomo: sample 1 (mini) session_1: expected a list of turns, got dict"),
    (json.dumps([conversation(session_1_date_time="2023-05-08", session_1=[
        {"speaker": "Ann", "dia_id": "D1:1", "text": "hi"}, {"dia_id": "D1:2", "text": "hi"}])]).encode(),
     "locomo: sample 1 (mini) session_1 turn 2: 'speaker' must be a non-empty string, got None"),
    (json.dumps([conversation(session_1_date_time="2023-05-08", session_1=[
        {"speaker": "Ann", "dia_id": "D1:1", "text": 5}])]).encode(),
     "locomo: sample 1 (mini) session_1 turn 1 (D1:1): 'text' must be a string, got 5"),
]


@pytest.mark.parametrize("data, message", BAD, ids=[m.split(":")[-1][:30] for _, m in BAD])
def test_a_file_that_is_not_locomo_shaped_is_one_line_naming_where(data: bytes, message: str,
                                                                    store: pmem.Store) -> None:
    with pytest.raises(InvalidOperation, match=re.escape(message)) as e:
        list(Ingestor(store, make_extractor("template", fmt="locomo")).run(read_records(data, "locomo")))
    assert "\n" not in str(e.value)
    assert store.last_index() == 0  # the whole file is checked before the first record comes out


def test_a_locomo_shaped_file_gives_one_record_per_turn_and_every_turn_a_receipt(tmp_path: Path) -> None:
    """Two samples as LoCoMo has them: image turns with and without ``img_url``/``query``/``re-download``,
    gold annotations beside the conversation, dated sessions that have no turns, and ten sessions, so
    ``session_10`` must come after ``session_9``."""
    raw = json.loads(LOCOMO.read_bytes())
    turns = [(s["sample_id"], t) for s in raw for k, v in s["conversation"].items()
             if re.fullmatch(r"session_\d+", k) for t in v]
    records = list(read_records(LOCOMO.read_bytes(), "locomo"))
    assert len(records) == len(turns) == 29
    # sessions by number
    assert [r.source for r in records] == [f"{t['speaker']} ({sid}:{t['dia_id']})" for sid, t in turns]
    assert all(r.observed_at and r.speaker for r in records)
    assert (records[-3].source.split(" ")[-1], records[-3].observed_at) == ("(inv-2:D9:1)", "2022-07-27T10:37:00")
    assert (records[-1].source.split(" ")[-1], records[-1].observed_at) == ("(inv-2:D10:2)", "2022-08-25T13:14:00")
    with pmem.open(tmp_path / "locomo.db") as store:
        receipts = list(Ingestor(store, make_extractor("template", fmt="locomo")).run(records))
        assert {r["record"] for r in receipts} == {r.number for r in records}
        silent = [r for r in receipts if r["event_index"] is None and not r["reason"]]
        assert silent == []
        facts = [r for r in receipts if r["key"] != TURN_KEY]
        assert store.last_index() == len(receipts) == 29  # every turn in the log: 10 facts, 19 turns without
        assert sum(1 for r in facts if r["event_index"] is not None) == 10
        assert {c.key: (c.value, c.status) for c in store.frontier()} == {
            "priya.home_city": ("Lisbon", "contested"),  # "I think ... Porto" is hedged: held open
            "tomas.job": ("pastry chef", "active"),  # "Actually, ..." corrects "baker"
            "ana.running_club": ("the Hill Harriers", "active"),
            "ben.bike": ("dark red", "active"),  # "Correction: ..." in session 9, after session 6
        }  # Priya's favourite plant was accepted, then withdrawn ("no longer")
