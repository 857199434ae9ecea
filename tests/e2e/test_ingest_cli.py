"""``pmem ingest`` as a user runs it: records in, one receipt per fact (or per record without one) out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pmem.domain.extraction.slots import SLOTS
from tests.chat_server import chat_server
from tests.conftest import ROOT
from tests.e2e.test_cli import error, ok, pmem

CONTEXT = ROOT / "tests" / "data" / "factconsolidation" / "factconsolidation_6k_context.txt"  # vendored, MIT


def test_ingesting_the_6k_context_leaves_a_frontier_of_294_cells(db: str) -> None:
    receipts = ok(db, "ingest", str(CONTEXT))
    assert len(receipts) == 456  # the header line, then one receipt per fact
    assert receipts[0]["event_index"] is None and receipts[0]["reason"] == "no template matched"
    assert [r["record"] for r in receipts] == list(range(1, 457))
    assert {r["op"] for r in receipts[1:]} == {"accept"}
    assert {"event_index", "op", "reason", "head", "record", "key", "applied"} <= set(receipts[1])
    frontier = ok(db, "frontier")
    assert len(frontier) == 294
    cell = ok(db, "get", "united states of america.capital", "--disclose", "history")[0]
    assert cell["value"] == "Harrisville"  # fact 396 overrides fact 247 (a counterfactual edit)
    assert cell["history"][0]["value"] == "Washington, D.C." and cell["history"][0]["status"] == "superseded"


def test_ingest_reads_jsonl_from_standard_input(db: str) -> None:
    data = (b'{"text": "Earlier observation: mug 1 was in cabinet 2."}\n'
            b'"The move of mug 1 to cabinet 2 was reported in error."\n')
    receipts = ok(db, "ingest", "-", "--format", "jsonl", stdin=data)
    assert [(r["record"], r["op"], r["head"]) for r in receipts] == [
        (1, "accept", {"value": "cabinet 2", "status": "active"}), (2, "revoke", None)]
    assert ok(db, "get", "mug 1.location")[0]["status"] == "empty"


def test_a_jsonl_file_is_read_as_jsonl_by_its_name(db: str, tmp_path: Path) -> None:
    f = tmp_path / "notes.jsonl"
    f.write_text('{"text": "My home city is now Porto.", "source": "chat"}\n')
    (r,) = ok(db, "ingest", str(f))
    assert (r["key"], r["op"], r["head"]["value"]) == ("home_city", "accept", "Porto")


def test_the_llm_extractor_answers_with_a_clear_error_and_creates_no_store(db_path: Path, tmp_path: Path) -> None:
    """SQLite-only: "no store" is checked as no file created."""
    db = db_path
    f = tmp_path / "in.txt"
    f.write_text("My home city is now Porto.\n")
    err = error(pmem(db, "ingest", str(f), "--extractor", "llm"))
    assert err["error"] == "extractor not configured" and "llm extractor not configured" in err["detail"]
    assert not db.exists()
    r = pmem(db, "ingest", str(f), "--extractor", "magic")
    assert r.returncode == 2 and "unknown extractor" in error(r)["detail"]
    r = pmem(db, "ingest", str(tmp_path / "missing.txt"))
    assert r.returncode == 2 and "cannot read" in error(r)["detail"]


def test_soft_keys_on_the_6k_context_merge_nothing_and_keep_294_cells(db: str) -> None:
    receipts = ok(db, "ingest", str(CONTEXT), "--soft-keys", "on")
    assert not any(r["key"].startswith("_alias.") for r in receipts[1:])
    assert {r["identity"] for r in receipts[1:]} == {"new", "exact"}
    assert len(ok(db, "frontier")) == 294


def test_soft_keys_merge_a_paraphrase_and_unmerge_undoes_it_for_later_records(db: str, tmp_path: Path) -> None:
    f = tmp_path / "in.txt"
    f.write_text("My 5K PB is now 25:50.\nMy personal best over 5 km is now 24:59.\n")
    receipts = ok(db, "ingest", str(f), "--soft-keys", "on")
    assert [r["key"] for r in receipts] == ["5k_pb", "_alias.personal_best_over_5_km", "5k_pb"]
    assert receipts[2]["candidates"][0]["key"] == "5k_pb" and receipts[2]["conflict"] is True
    (r,) = ok(db, "unmerge", "personal best over 5 km")
    assert (r["key"], r["op"], r["head"]["value"]) == ("_alias.personal_best_over_5_km", "accept",
                                                     "personal_best_over_5_km")
    f.write_text("My personal best over 5 km is now 23:00.\n")
    (again,) = ok(db, "ingest", str(f), "--soft-keys", "on")
    assert (again["key"], again["identity"]) == ("personal_best_over_5_km", "own")
    assert ok(db, "get", "5K PB")[0]["value"] == "24:59"
    err = error(pmem(db, "ingest", str(f), "--key-threshold", "1.5"))
    assert "key-threshold" in err["detail"]


def test_an_unreachable_model_server_leaves_a_recorded_noop_per_record(db: str, tmp_path: Path) -> None:
    f = tmp_path / "in.txt"
    f.write_text("My home city is now Porto.\n\nMy dog is now Rex.\n")
    receipts = ok(db, "ingest", str(f), "--extractor", "llm", "--model", "openai/qwen",
                  "--api-base", "http://127.0.0.1:9/v1")
    assert [(r["record"], r["key"], r["op"]) for r in receipts] == [
        (1, "_extraction.failed", "noop"), (3, "_extraction.failed", "noop")]
    assert all("model call failed" in r["reason"] and r["event_index"] for r in receipts)
    logged = ok(db, "log")
    assert [e["event_index"] for e in logged] == [r["event_index"] for r in receipts]
    assert ok(db, "frontier") == []


SAID = {"speaker_a": "Ada", "speaker_b": "Iker", "session_1_date_time": "10:05 am on 3 March, 2024",
        "session_1": [{"speaker": "Ada", "dia_id": "D1:1", "text": "I work as a nurse at the city hospital."}]}
"""A one-turn conversation in LoCoMo's shape, written for this test."""


def model_answer(request: dict[str, Any]) -> str:
    """The model, by the schema it is asked for: a job from the free-form pass, the same job and a place from
    the card, and a blind answer that confirms the job and finds no place."""
    name = request["response_format"]["json_schema"]["name"]
    if name == "facts":
        return json.dumps({"facts": [{"subject": "Ada", "attribute": "job", "value": "nurse at the city hospital",
                                      "evidence": "a nurse"}]})
    if name == "slots":
        return json.dumps({**dict.fromkeys(SLOTS, ""), "job": "nurse at the city hospital", "places": "city hospital"})
    asked = request["messages"][-1]["content"]
    return '{"answer": "not stated"}' if "where does Ada" in asked else '{"answer": "a nurse at the city hospital"}'


@pytest.mark.parametrize("slots, asked", [((), ["facts", "answer", "slots", "answer"]),
                                          (("--slots", "off"), ["facts", "answer"])], ids=["default", "off"])
def test_the_llm_route_asks_the_slot_card_as_well_by_default(db_path: Path, tmp_path: Path, slots: tuple[str, ...],
                                                             asked: list[str]) -> None:
    """SQLite-only: the model's side is what is tested. Through a real local chat server (tests/chat_server.py)."""
    f = tmp_path / "one.json"
    f.write_text(json.dumps([{"sample_id": "inv", "conversation": SAID}]))
    with chat_server(model_answer) as server:
        receipts = ok(db_path, "ingest", str(f), "--format", "locomo", "--extractor", "llm", "--model",
                      "openai/qwen", "--api-base", server.base, *slots)
    assert [r["response_format"]["json_schema"]["name"] for r in server.requests] == asked
    assert [(r["key"], r["op"]) for r in receipts if r["applied"]] == [("ada.job", "accept")]  # written once
    assert [r["reason"] for r in receipts if not r["applied"]] == ([
        "dropped fact 'ada.job' = 'nurse at the city hospital': the first pass wrote the same value",
        "dropped fact 'ada.places' = 'city hospital': not confirmed: asked blind, the model found no answer in "
        "the record ('not stated')"] if not slots else [])


def test_ingest_reads_a_locomo_file_one_receipt_per_turn_and_a_bad_one_is_one_line_naming_where(
        db: str, tmp_path: Path) -> None:
    import json

    sample = {"sample_id": "mini", "conversation": {
        "speaker_a": "Ann", "speaker_b": "Bo", "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "My home city is now Porto."},
                      {"speaker": "Bo", "dia_id": "D1:2", "text": "Nice, I love it there."}]}}
    f = tmp_path / "mini.json"
    f.write_text(json.dumps([sample]))
    receipts = ok(db, "ingest", str(f), "--format", "locomo")
    assert [(r["record"], r["key"], r["op"], r["speaker"], r["source"]) for r in receipts] == [
        (1, "ann.home_city", "accept", "Ann", "Ann (mini:D1:1)"),
        (2, "_extraction.no_facts", "noop", "Bo", "Bo (mini:D1:2)")]  # no fact, but recorded: turns read it
    assert receipts[1]["reason"].startswith("no sentence of the form")
    event, turn = ok(db, "log")
    assert (event["observed_at"], event["source"]) == ("2023-05-08T13:56:00", "Ann (mini:D1:1)")
    assert (turn["observed_at"], turn["source"], turn["text"]) == (
        "2023-05-08T13:56:00", "Bo (mini:D1:2)", "Nice, I love it there.")

    del sample["conversation"]["session_1"][1]["dia_id"]
    f.write_text(json.dumps([sample]))
    other = tmp_path / "other.db"  # a SQLite file: "nothing created" is checked as no file
    err = error(pmem(other, "ingest", str(f), "--format", "locomo"))
    assert err == {"error": "invalid operation", "detail": f"{f}: locomo: sample 1 (mini) session_1 turn 2: "
                                                           "'dia_id' must be a non-empty string, got None"}
    assert not other.exists()  # refused before the store was created
