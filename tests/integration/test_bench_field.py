"""The LoCoMo and HaluMem benchmark commands end to end on made-up inputs of the same shapes: real SQLite
stores, real litellm calls to a real tiny chat server on 127.0.0.1 (tests/chat_server.py), the final JSON
line, and a rerun that replays the recorded answers with no server at all."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from benchmarks import halumem, locomo
from benchmarks.halumem import GOLD_FIELDS, run_user
from pmem.adapters.llm.client import _litellm
from pmem.domain.extraction.facts import Extraction
from pmem.domain.extraction.grounding import Utterance
from pmem.domain.extraction.template import TemplateExtractor
from tests.chat_server import Script, chat_server

WHEN = "Jan 15, 2029, 16:15:20"


def point(index: int, text: str, update: bool = False, originals: tuple[str, ...] = (),
          source: str = "secondary") -> dict[str, Any]:
    return {"index": index, "memory_content": text, "memory_type": "Persona Memory", "memory_source": source,
            "is_update": str(update), "original_memories": list(originals), "timestamp": WHEN, "importance": 0.5}


USER = {"uuid": "u-1", "persona_info": "Name: Ada Byron; Location: Porto", "sessions": [
    {"start_time": WHEN, "memory_points": [point(1, "Ada Byron's job title is director"),
                                           point(2, "Ada Byron's monthly income is 1500 euros"),
                                           point(3, "Ada Byron's job title is pilot", source="interference")],
     "dialogue": [{"role": "user", "content": "I work as a director.", "timestamp": WHEN}],
     "questions": [{"question": "What is Ada Byron's job title?", "answer": "director", "evidence": [],
                    "question_type": "Basic Fact Recall"},
                   {"question": "What is Ada's middle name?", "answer": "Unknown.", "evidence": [],
                    "question_type": "Memory Boundary"}]},
    {"start_time": WHEN, "memory_points": [
        point(1, 'Ada Byron\'s career_status updated job_title from "director" to "senior director".', True,
              ("Ada Byron's job title is director",)),
        point(2, "Ada Byron now enjoys sailing on weekends.", True, ("Ada Byron dislikes boats",))],
     "questions": [{"question": "What is Ada Byron's current job title?", "answer": "senior director",
                    "evidence": [], "question_type": "Dynamic Update"}]}]}


def last_json(out: str) -> dict[str, Any]:
    line = out.strip().splitlines()[-1]
    return dict(json.loads(line))


def test_halumem_writes_the_points_and_scores_the_update_stage_offline(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    user = tmp_path / "user.jsonl"
    user.write_text(json.dumps(USER) + "\n")
    halumem.main(["--user", str(user), "--extractor", "none", "--reader", "none", "--offline",
                  "--record", str(tmp_path / "answers.jsonl"), "--results", str(tmp_path / "r")])
    figures = last_json(capsys.readouterr().out)
    (updates,) = figures["update_stage"]
    assert (updates["update points"], updates["correct"], updates["omission"], updates["hallucination"]) == (
        2, 1, 1, 0)  # the quoted change is taken; "now enjoys sailing" fits no template
    assert figures["records_written"] == 4  # the interference point is not written
    by_type = {r["type"]: r for r in figures["qa"]}
    assert by_type["Basic Fact Recall"]["answer in context"] == 1.0
    assert by_type["Dynamic Update"]["answer in context"] == 1.0
    assert by_type["Memory Boundary"]["answer in context"] is None
    assert figures["goals"]["template (offline)"]["no_hallucination"] is True


class Spy(Mapping[str, Any]):
    """A memory point that logs every read of a gold update field into ``log``."""

    def __init__(self, fields: dict[str, Any], log: list[str]) -> None:
        self.fields, self.log = fields, log

    def __getitem__(self, key: str) -> Any:
        if key in GOLD_FIELDS:
            self.log.append(key)
        return self.fields[key]

    def __iter__(self) -> Iterator[str]:
        self.log.append("every field")
        return iter(self.fields)

    def __len__(self) -> int:
        return len(self.fields)

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self.fields else default


class Checked:
    """The template extractor, failing the test if any gold field was read before a point reached it."""

    name = "template"

    def __init__(self, log: list[str]) -> None:
        self.inner, self.log, self.texts = TemplateExtractor(), log, []

    def extract(self, text: str, record: int, said: Utterance | None = None) -> Extraction:
        assert not self.log, f"gold fields read before writing: {self.log}"
        self.texts.append(text)
        return self.inner.extract(text, record, said)


def test_the_writer_never_sees_the_gold_update_fields(tmp_path: Path) -> None:
    log: list[str] = []
    session = dict(USER["sessions"][1])  # type: ignore[index]
    session["memory_points"] = [Spy(p, log) for p in session["memory_points"]]
    writer = Checked(log)
    rows = list(run_user({"sessions": [session]}, [1], writer, None, "points", None, None, tmp_path / "s.db"))
    assert writer.texts == [p["memory_content"] for p in USER["sessions"][1]["memory_points"]]  # type: ignore[index]
    assert [r["verdict"] for r in rows if r["stage"] == "update"] == ["correct", "omission"]
    assert "is_update" in log  # the scorer reads them, after the session was written


LOCOMO = [{"sample_id": "made-up", "conversation": {
    "speaker_a": "Nora", "speaker_b": "Iker", "session_1_date_time": "1:56 pm on 8 May, 2023",
    "session_1": [{"speaker": "Nora", "dia_id": "D1:1", "text": "My home city is now Porto."},
                  {"speaker": "Iker", "dia_id": "D1:2", "text": "I adopted a cat called Miso last week."}],
    "session_2_date_time": "10:00 am on 9 June, 2023",
    "session_2": [{"speaker": "Nora", "dia_id": "D2:1", "text": "I started painting lessons in June."}]},
    "qa": [{"question": "Where does Nora live?", "answer": "Porto", "evidence": ["D1:1"], "category": 4},
           {"question": "What is Iker's cat called?", "answer": "Miso", "evidence": ["D1:2"], "category": 4},
           {"question": "When did Nora start painting?", "answer": "June 2023", "evidence": ["D2:1"], "category": 2},
           {"question": "Which cat?", "answer": "Miso", "evidence": ["D1:2"], "category": 5}]}]


@pytest.fixture(autouse=True)
def restore_litellm(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tape replaces ``litellm.completion``; put it back after the test."""
    litellm = _litellm()
    monkeypatch.setattr(litellm, "completion", litellm.completion)


def run_locomo(capsys: pytest.CaptureFixture[str], tmp_path: Path, *args: str) -> dict[str, Any]:
    conv = tmp_path / "locomo.json"
    conv.write_text(json.dumps(LOCOMO))
    locomo.main(["--conversation", str(conv), "--extractor", "none", "--results", str(tmp_path / "r"),
                 "--plots", str(tmp_path / "r"), *args])
    return last_json(capsys.readouterr().out)


def test_locomo_without_a_reader_gives_the_evidence_in_each_context(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    figures = run_locomo(capsys, tmp_path, "--reader", "none", "--offline", "--answers", str(tmp_path / "none"),
                         "--record", str(tmp_path / "answers.jsonl"))
    table = {(r["arm"], r["category"]): r for r in figures["table"]}
    assert set(table) == {(arm, cat) for arm in locomo.ARMS for cat in ("single-hop", "temporal", "all")}
    assert table["full conversation", "all"]["answer in context"] == 1.0  # three turns fit any window
    assert table["P-Mem cells", "single-hop"]["questions"] == 2  # category 5 is not asked
    assert figures["reader"] is None and figures["model_calls_asked"] == 0


def test_locomo_records_the_readers_answers_and_a_rerun_replays_them_without_a_server(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = Script()
    script.add("reader", "Porto")
    script.add("judge", "CORRECT")
    record = tmp_path / "answers.jsonl"
    with chat_server(script) as server:
        first = run_locomo(capsys, tmp_path, "--reader", "openai/reader", "--judge", "openai/judge",
                           "--base", server.base, "--record", str(record), "--answers", str(record))
        asked = len(server.requests)
        distinct = len({json.dumps(r["messages"]) for r in server.requests})
    table = {(r["arm"], r["category"]): r for r in first["table"]}
    assert table["full conversation", "single-hop"]["F1"] == 0.5  # right about Nora, wrong about the cat
    assert table["full conversation", "single-hop"]["judged"] == 1.0  # this judge grants everything
    assert first["model_calls_asked"] == asked == distinct  # a request asked again is answered from the tape
    assert 0 < asked <= 2 * 3 * len(locomo.ARMS)  # a reader and a judge call per question and context
    again = run_locomo(capsys, tmp_path, "--reader", "openai/reader", "--judge", "openai/judge",
                       "--base", "http://127.0.0.1:9/v1", "--offline", "--answers", str(record))
    assert again["table"] == first["table"] and again["model_calls_asked"] == 0


def test_a_reader_nobody_serves_stops_the_run_with_one_line(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit, match=r"model openai/reader at http://127.0.0.1:9/v1 did not answer .*none"):
        run_locomo(capsys, tmp_path, "--reader", "openai/reader", "--base", "http://127.0.0.1:9/v1",
                   "--record", str(tmp_path / "answers.jsonl"), "--answers", str(tmp_path / "answers.jsonl"))
    assert (tmp_path / "answers.jsonl").read_text() == ""  # a failed call is not kept as an answer
