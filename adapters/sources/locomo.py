"""LoCoMo conversations as ingest records (``pmem ingest FILE --format locomo``).

A LoCoMo file is a JSON list of samples (or one sample), each ``{"sample_id", "conversation": {
"speaker_a", "speaker_b", "session_<n>_date_time": "1:56 pm on 8 May, 2023", "session_<n>": [turn, ...]}}``
with turns ``{"speaker", "dia_id", "text"}``. What a conversation becomes:

- every dialogue turn is one record, in order: samples as given, sessions by number, turns as listed;
  records are numbered 1, 2, ... across the whole file;
- the turn's ``text`` is the observation, its ``speaker`` says whose it is (a first-person fact is about
  the speaker: ingest puts it under ``<speaker>.<key>``), the other of ``speaker_a``/``speaker_b`` is its
  listener (a fact about the listener is not taken from this turn), ``<speaker> (<sample_id>:<dia_id>)`` is its
  source (who said it, and where: turn-mode reading shows it), and its
  session's date and time is its ``observed_at`` (ISO-8601, no time zone, as LoCoMo gives none);
- image turns keep only what was said: ``blip_caption`` is a captioning model's guess, not the speaker's
  words; ``qa``, ``event_summary``, ``observation`` and ``session_summary`` are gold annotations, not input.

The whole file is checked before any record is returned: a file that is not LoCoMo-shaped raises
:class:`InvalidOperation` with one line naming the sample, session and turn. Nothing here is written.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import orjson

from pmem.domain.errors import InvalidOperation

from .record import Record

_SESSION = re.compile(r"session_(\d+)")
DATE_FORMAT = "%I:%M %p on %d %B, %Y"  # LoCoMo's "1:56 pm on 8 May, 2023"
REPLY_CHARS = 400  # of the turn before, kept as a turn's context (a question is short; a long turn is cut)


def locomo_records(data: bytes) -> list[Record]:
    """Every turn of every conversation in ``data``, as records; raises on the first shape problem."""
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise _bad(f"not JSON: {e}") from None
    samples = doc if isinstance(doc, list) else [doc]
    records: list[Record] = []
    for n, sample in enumerate(samples, 1):
        where = f"sample {n}"
        if not isinstance(sample, dict) or not isinstance(sample.get("conversation"), dict):
            raise _bad(f"{where}: expected an object with a 'conversation' object")
        sample_id = sample.get("sample_id", f"sample{n}")
        if not isinstance(sample_id, str) or not sample_id.strip():
            raise _bad(f"{where}: 'sample_id' must be a non-empty string, got {sample_id!r}")
        where = f"sample {n} ({sample_id})"
        conversation: dict[str, Any] = sample["conversation"]
        sessions = sorted((int(m[1]), key) for key in conversation if (m := _SESSION.fullmatch(key)))
        if not sessions:
            raise _bad(f"{where}: the conversation has no session_<n> lists")
        pair = [conversation.get(f"speaker_{s}") for s in "ab"]
        for _, session in sessions:
            observed_at = _session_time(conversation, session, where)
            turns = conversation[session]
            if not isinstance(turns, list):
                raise _bad(f"{where} {session}: expected a list of turns, got {type(turns).__name__}")
            before: str | None = None  # the turn a turn answers: the one before it in its session
            for t, turn in enumerate(turns, 1):
                speaker, dia_id, text = _turn(turn, f"{where} {session} turn {t}")
                listeners = tuple(p.strip() for p in pair if isinstance(p, str) and p.strip() not in ("", speaker))
                records.append(Record(len(records) + 1, text, f"{speaker} ({sample_id}:{dia_id})",
                                      observed_at=observed_at, speaker=speaker, listeners=listeners,
                                      replying_to=before))
                before = f"{speaker}: {text[:REPLY_CHARS]}" if text.strip() else before
    return records


def _session_time(conversation: dict[str, Any], session: str, where: str) -> str:
    raw = conversation.get(f"{session}_date_time")
    if not isinstance(raw, str):
        raise _bad(f"{where}: {session} has no {session}_date_time string")
    for parse in (lambda s: datetime.strptime(s.strip(), DATE_FORMAT), datetime.fromisoformat):
        try:
            return parse(raw).isoformat()
        except ValueError:
            continue
    raise _bad(f"{where}: {session}_date_time {raw!r} is neither like '1:56 pm on 8 May, 2023' nor ISO-8601")


def _turn(turn: Any, where: str) -> tuple[str, str, str]:
    if not isinstance(turn, dict):
        raise _bad(f"{where}: expected an object, got {type(turn).__name__}")
    for name in ("speaker", "dia_id"):
        if not isinstance(turn.get(name), str) or not turn[name].strip():
            raise _bad(f"{where}: {name!r} must be a non-empty string, got {turn.get(name)!r}")
    if not isinstance(turn.get("text"), str):
        raise _bad(f"{where} ({turn['dia_id']}): 'text' must be a string, got {turn.get('text')!r}")
    return turn["speaker"].strip(), turn["dia_id"].strip(), turn["text"]


def _bad(message: str) -> InvalidOperation:
    return InvalidOperation(f"locomo: {message}", field="format")
