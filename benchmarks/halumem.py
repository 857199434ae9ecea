"""HaluMem's update stage and QA through P-Mem: gold memory points (or the dialogue) written as an agent would.

For one user (``--user FILE``, HaluMem's JSON lines, the first user of the file), session by session
(``--sessions``, 1-based), it writes what the session gives through P-Mem's own path from language to keys
and operations: ``pmem ingest`` (an extractor, the rule-based annotator, soft key identity with the key
judge of the extractor's model, or the rule-based one offline). What it writes (``--source``):

- ``points``: the session's memory points in order (HaluMem's ``interference`` points, which a memory should
  not hold, are left out). The writer sees each point's text and time only: the gold ``is_update`` and
  ``original_memories`` fields are stripped before anything is written (:func:`writer_points`);
- ``dialogue``: the session's dialogue turns, the user's under the persona's name.

Each extractor is a column: the offline template extractor always, and the LLM extractor when
``--extractor MODEL`` names one. After each session:

- the update stage, for every update point of the session: the context P-Mem reads for the point
  (``read(point, mode="cells")``, current values only) is ``correct`` when it holds the new value and shows
  no line with the original as its value, ``hallucination`` when a line shows the original, ``omission``
  otherwise (value overlap of content words, :func:`classify`); beside it the judge model's verdict on the
  same context (``--judge``, by default the reader);
- QA, for every question of the session: whether the context (``read(question, mode="cells", dated=True)``)
  holds the answer (at least half of its content words; Memory Boundary questions have no answer to hold),
  and with ``--reader MODEL`` the reader's answer as the judge grades it.

Every model call is answered from ``--answers`` files where recorded, else asked and appended to ``--record``
(default ``results/halumem/answers.jsonl``: HaluMem is CC BY-NC-ND, so its text stays out of the repository);
``--offline`` stops at the first call that is not recorded.

    .venv/bin/python -m benchmarks.halumem --user ../shared/data/halumem/pilot_slice_user0.jsonl \\
        [--sessions 1-6] [--extractor openai/qwen|none] [--reader openai/qwen|none] [--source points|dialogue]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import pmem
from benchmarks.extraction import NotRecorded, Tape, holds
from benchmarks.harness import ROOT, Run, add_output_options, read_text
from benchmarks.locomo import Chat, answer, grade, install_tape, mean, model_or_none, parse_sessions
from pmem.adapters.llm.client import LlmSettings
from pmem.adapters.service.ingest import Ingestor, make_identity
from pmem.adapters.sources.record import Record
from pmem.domain.extraction.grounding import content
from pmem.domain.extraction.template import DialogueTemplateExtractor, TemplateExtractor

K = 12
WRITER_FIELDS = ("index", "memory_content", "timestamp")
"""All a writer sees of a memory point."""
GOLD_FIELDS = ("is_update", "original_memories")
QUESTION_TYPES = ("Basic Fact Recall", "Dynamic Update", "Memory Conflict", "Memory Boundary",
                  "Multi-hop Inference", "Generalization & Application")
BOUNDARY = "Memory Boundary"
VERDICTS = ("correct", "omission", "hallucination")
_QUOTED = re.compile(r"from [\"'\u201c\u2018](?P<old>[^\"\u201c\u201d]+?)[\"'\u201d\u2019] to "
                     r"[\"'\u201c\u2018](?P<new>[^\"\u201c\u201d]+?)[\"'\u201d\u2019]")
_ATTRIBUTE = re.compile(r"'s (?P<a>[\w -]{1,40}?) (?:has been |has |was |had )?(?:updated|changed)"
                        r"(?: (?P<b>[\w -]{1,40}?))? from ")
UPDATE_JUDGE_PROMPT = (
    "A memory was told new information that replaces older information. Read what the memory shows as "
    "current and grade it with one word: CORRECT if it shows the new information and not the older one as "
    "current, HALLUCINATION if it shows the older information as current, OMISSION if it shows neither.\n\n"
    "Memory (current values):\n{context}\n\nOlder information: {old}\nNew information: {new}\nGrade:")


# -- what the writer sees -----------------------------------------------------------------------------------------
def writer_points(points: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The points a writer gets: HaluMem's gold points (interference points left out), each with its text and
    time only; the gold update fields are never read here."""
    return [{f: p[f] for f in WRITER_FIELDS if f in p} for p in points if p.get("memory_source") != "interference"]


def when(stamp: str | None) -> str | None:
    """HaluMem's ``Jan 15, 2029, 16:15:20`` as ISO 8601, or None."""
    try:
        return datetime.strptime(stamp or "", "%b %d, %Y, %H:%M:%S").isoformat()
    except ValueError:
        return None


def point_records(points: list[dict[str, Any]], session: int, start: int) -> list[Record]:
    return [Record(start + i, p["memory_content"], f"halumem:s{session}:p{p.get('index', i + 1)}",
                   observed_at=when(p.get("timestamp"))) for i, p in enumerate(points)]


def persona_name(user: Mapping[str, Any]) -> str:
    m = re.search(r"Name:\s*([^;]+)", str(user.get("persona_info", "")))
    return m[1].strip() if m else "the user"


def dialogue_records(session: Mapping[str, Any], number: int, name: str, start: int) -> list[Record]:
    """The session's turns as dialogue records: the user speaks as ``name``, to the assistant."""
    out = []
    for i, turn in enumerate(session.get("dialogue", [])):
        user = turn.get("role") == "user"
        speaker, listener = (name, "assistant") if user else ("assistant", name)
        out.append(Record(start + i, turn.get("content") or "", f"halumem:s{number}:t{i}",
                          observed_at=when(turn.get("timestamp")), speaker=speaker, listeners=(listener,)))
    return out


# -- the update stage ---------------------------------------------------------------------------------------------
def update_values(point: str, originals: list[str]) -> tuple[str, str, str]:
    """(old, new, attribute) of an update point: the quoted values of ``X's A changed [B] from "a" to "b"``
    and the attribute they are values of, when it has them; else the original memories (each quoted change
    among them by the value it set), the point itself, and no attribute."""
    m = _QUOTED.search(point)
    if m:
        named = _ATTRIBUTE.search(point[:m.start() + 5])
        return m["old"], m["new"], (named["b"] or named["a"]).replace("_", " ") if named else ""
    return " ".join(o["new"] if (o := _QUOTED.search(text)) else text for text in originals), point, ""


def _covers(words: set[str], text: set[str]) -> bool:
    return bool(words) and len(words & text) >= len(words) / 2


def classify(context: str, old: str, new: str, attribute: str = "") -> str:
    """``hallucination`` when a line of ``context`` (about ``attribute``: every word of it, when given) shows
    the old value (most of its words, and of the words that set it apart from the new one; when none do, a
    line without the new value's own words), ``correct`` when the context holds the new value (most of its
    words and of its own words), ``omission`` otherwise."""
    old_w, new_w, about = content(old), content(new), content(attribute)
    old_only, new_only = old_w - new_w, new_w - old_w
    for line in context.splitlines():
        words = content(line)
        if about <= words and _covers(old_w, words) and (
                _covers(old_only, words) if old_only else not new_only & words):
            return "hallucination"
    everything = content(context)
    return "correct" if _covers(new_w, everything) and (not new_only or _covers(new_only, everything)) else "omission"


def read_verdict(reply: str) -> str | None:
    found = [v for v in VERDICTS if v.upper() in reply.upper()]
    return found[0] if len(found) == 1 else None


# -- one user --------------------------------------------------------------------------------------------------
def load_user(path: Path) -> dict[str, Any]:
    line = next((ln for ln in read_text(path).splitlines() if ln.strip()), None)
    if line is None:
        raise SystemExit(f"{path}: no user in the file")
    user: dict[str, Any] = json.loads(line)
    if not isinstance(user.get("sessions"), list):
        raise SystemExit(f"{path}: line 1 has no 'sessions' list (not a HaluMem user)")
    return user


def session_records(user: Mapping[str, Any], number: int, source: str, start: int) -> list[Record]:
    session = user["sessions"][number - 1]
    if source == "dialogue":
        return dialogue_records(session, number, persona_name(user), start)
    return point_records(writer_points(session["memory_points"]), number, start)


def run_user(user: Mapping[str, Any], sessions: list[int], extractor: Any, identity_llm: LlmSettings | None,
             source: str, reader: Chat | None, judge: Chat | None, db: Path) -> Iterator[dict[str, Any]]:
    """Writes the sessions in order; after each, one row per update point and per question."""
    with pmem.open(str(db)) as store:
        identity = make_identity(store, "auto", extractor.name, identity_llm, 0.72)
        ingestor = Ingestor(store, extractor, source="halumem", identity=identity)
        written = 0
        for n in sessions:
            records = session_records(user, n, source, written + 1)
            written += len(records)
            list(ingestor.run(records))
            session = user["sessions"][n - 1]
            for p in session["memory_points"]:  # scoring reads the gold fields; the writer never did
                if p.get("is_update") == "True" and p.get("memory_source") != "interference":
                    yield update_row(store, p, n, judge)
            for q in session.get("questions", []):
                yield question_row(store, q, n, reader, judge)


def update_row(store: pmem.Store, point: Mapping[str, Any], session: int, judge: Chat | None) -> dict[str, Any]:
    text = point["memory_content"]
    old, new, attribute = update_values(text, list(point.get("original_memories") or []))
    context = store.read(text, mode="cells", k=K).context
    row: dict[str, Any] = {"stage": "update", "session": session, "point": text, "old": old, "new": new,
                           "attribute": attribute, "verdict": classify(context, old, new, attribute)}
    if judge is not None:
        row["judge"] = read_verdict(judge(UPDATE_JUDGE_PROMPT.format(context=context, old=old, new=new), 6))
    return row


def question_row(store: pmem.Store, q: Mapping[str, Any], session: int, reader: Chat | None,
                 judge: Chat | None) -> dict[str, Any]:
    context = store.read(q["question"], mode="cells", k=K, dated=True).context
    gold = str(q["answer"])
    row: dict[str, Any] = {"stage": "qa", "session": session, "type": q.get("question_type"),
                           "question": q["question"], "gold": gold,
                           "in_context": None if q.get("question_type") == BOUNDARY else holds(context, gold)}
    if reader is not None:
        row["answer"] = answer(reader, q["question"], context)
        row["judged"] = None if judge is None else grade(judge, q["question"], gold, row["answer"])
    return row


# -- the tables --------------------------------------------------------------------------------------------------
def update_table(rows: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    out = []
    for name, mine in rows.items():
        ups = [r for r in mine if r["stage"] == "update"]
        row: dict[str, Any] = {"extractor": name, "update points": len(ups)}
        for v in VERDICTS:
            row[v] = sum(r["verdict"] == v for r in ups)
        row["correct %"] = 100 * row["correct"] / len(ups) if ups else None
        for v in VERDICTS:
            row[f"judge: {v}"] = sum(r.get("judge") == v for r in ups) if any("judge" in r for r in ups) else None
        out.append(row)
    return out


def qa_table(rows: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    out = []
    for name, mine in rows.items():
        qs = [r for r in mine if r["stage"] == "qa"]
        for t in [*QUESTION_TYPES, "all"]:
            of = [r for r in qs if t in (r["type"], "all")]
            if of:
                out.append({"extractor": name, "type": t, "questions": len(of),
                            "answer in context": mean(r["in_context"] for r in of),
                            "reader judged correct": mean(r.get("judged") for r in of)})
    return out


def goals_met(updates: Mapping[str, Any], rows: list[dict[str, Any]]) -> dict[str, bool | None]:
    """The issue's goals for one extractor: at least 90% of updates correct, none hallucinated, and the answer
    in context for at least 90% of Dynamic Update and of Memory Conflict questions (None: none asked)."""
    out: dict[str, bool | None] = {"update_correct_at_least_90": (updates["correct %"] or 0) >= 90,
                                   "no_hallucination": updates["hallucination"] == 0}
    for t in ("Dynamic Update", "Memory Conflict"):
        share = mean(r["in_context"] for r in rows if r["stage"] == "qa" and r["type"] == t)
        out[f"{t} in context at least 90"] = None if share is None else share >= 0.9
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--user", type=Path, required=True, help="a HaluMem user file (JSON lines, the first user)")
    p.add_argument("--sessions", default="all", help="sessions written, 1-based: all, 1-6, 1,3 (default all)")
    p.add_argument("--source", choices=("points", "dialogue"), default="points")
    p.add_argument("--extractor", default=os.environ.get("PMEM_LLM_MODEL", "openai/qwen"),
                   help="MODEL for the LLM extractor column, or none (the template extractor only)")
    p.add_argument("--reader", default=os.environ.get("PMEM_LLM_MODEL", "openai/qwen"), help="MODEL or none")
    p.add_argument("--judge", help="MODEL or none (default: the reader)")
    p.add_argument("--base", default=os.environ.get("PMEM_LLM_BASE", "http://127.0.0.1:8080/v1"))
    p.add_argument("--answers", type=Path, action="append", default=[], help="recorded model answers to replay")
    p.add_argument("--record", type=Path, default=ROOT / "results" / "halumem" / "answers.jsonl",
                   help="new answers go here (and are replayed from here)")
    p.add_argument("--offline", action="store_true", help="never ask a model: a call not recorded stops the run")
    add_output_options(p, "halumem")
    a = p.parse_args(argv)
    tape = install_tape(a.answers, a.record, a.offline)
    user = load_user(a.user)
    chosen = parse_sessions(a.sessions)
    sessions = [n for n in range(1, len(user["sessions"]) + 1) if chosen is None or n in chosen]
    if not sessions:
        raise SystemExit(f"--sessions {a.sessions}: {a.user} has sessions 1 to {len(user['sessions'])}")
    base = a.base or None
    models = {k: model_or_none(v) for k, v in (("extractor", a.extractor), ("reader", a.reader))}
    models["judge"] = model_or_none(a.judge) if a.judge else models["reader"]
    reader = Chat(models["reader"], base) if models["reader"] else None
    judge = Chat(models["judge"], base) if models["judge"] else None
    template = TemplateExtractor() if a.source == "points" else DialogueTemplateExtractor()  # as pmem ingest picks
    extractors: dict[str, tuple[Any, LlmSettings | None]] = {"template (offline)": (template, None)}
    if models["extractor"]:
        from pmem.adapters.llm.extractor import LlmExtractor

        llm = LlmSettings(models["extractor"], base, timeout_s=600, attempts=2)
        extractors[f"llm ({models['extractor']})"] = (LlmExtractor(llm), llm)
    run = Run("halumem", a.results)
    rows: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, (extractor, llm)) in enumerate(extractors.items()):
            rows[name] = list(run_user(user, sessions, extractor, llm, a.source, reader, judge,
                                       Path(tmp) / f"{i}.db"))
    report(run, a, user, sessions, rows, models, tape)


def report(run: Run, a: argparse.Namespace, user: Mapping[str, Any], sessions: list[int],
           rows: dict[str, list[dict[str, Any]]], models: dict[str, str | None], tape: Tape) -> None:
    what = (f"HaluMem user {persona_name(user)} ({a.user.name}), sessions {sessions[0]}-{sessions[-1]} "
            f"({len(sessions)}), written from {a.source}")
    updates, qa = update_table(rows), qa_table(rows)
    run.table(updates, f"{what}: update stage (value overlap; judge {models['judge'] or 'none'})")
    if qa:
        run.table(qa, f"{what}: QA (reader {models['reader'] or 'none'})")
    written = sum(len(session_records(user, s, a.source, 1)) for s in sessions)
    goals = {name: goals_met(u, rows[name]) for name, u in zip(rows, updates, strict=True)}
    run.figures |= {"user": str(a.user), "sessions": sessions, "source": a.source, "records_written": written,
                    **models, "k": K, "model_calls_asked": tape.asked, "update_stage": updates, "qa": qa,
                    "goals": goals, "rows": rows}
    run.finish()


if __name__ == "__main__":
    try:
        main()
    except NotRecorded as e:
        sys.exit(f"error: {e}")
