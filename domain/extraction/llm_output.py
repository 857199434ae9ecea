"""Deterministic reading of what a language model answered (docs/ingest.md): text -> facts, or why not.

Models wrap JSON in code fences, put it after prose that itself holds braces, stop mid-string, add keys
nobody asked for, emit megabyte strings and invalid escapes. :func:`parse_facts` takes any of that and
returns either facts or a reason; it never raises. The adapter retries on a reason (bounded) and, when
the retries are spent, records the reason in the log, so no observation is dropped silently.

Per-fact problems (an empty or over-long key or value, a key that contains its own value, an unknown
assertion status or node type) drop that fact and say which (its position and key) and why in
``Extraction.dropped``; unknown fields of
a fact are ignored (the schema's fields are all we read). A fact without ``node_type`` gets ``None``:
the graph's rule-based default decides its type.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from pmem.domain.extraction.facts import CONFIDENCE, STATUSES, Extraction, Fact, OpHint, Status
from pmem.domain.extraction.grounding import Candidate, Utterance, check, fact_key, holds_value, resolve_subject
from pmem.domain.keys import normalize_key
from pmem.domain.node_types import NODE_TYPES, node_type_problem

MAX_OUTPUT_CHARS = 2 * 1024 * 1024  # a longer answer is cut here before parsing
MAX_VALUE_BYTES = 64 * 1024  # as for any operation (domain.operations)
MAX_KEY_CHARS = 200
MAX_CANDIDATES = 64  # how many '{' positions are tried as the start of the JSON document

FACTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "facts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "key": {"type": "string"},
                    "value": {"type": "string"},
                    "status": {"type": "string", "enum": list(STATUSES)},
                    "confidence": {"type": "number"},
                    "node_type": {"type": "string", "enum": list(NODE_TYPES)},
                },
                "required": ["key", "value", "status"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["facts"],
    "additionalProperties": False,
}
"""The JSON schema the model is asked to answer in."""

_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)(?:```|$)", re.S)
_BETWEEN = re.compile(r"[\s,]*")  # what separates a list's items
_BAD_ESCAPE = re.compile(r'\\(?!["\\/bfnrtu])|\\u(?![0-9a-fA-F]{4})')
_HINT: dict[Status, OpHint] = {"asserted": "accept", "reported": "accept", "hedged": "contest",
                               "withdrawn": "revoke"}


def _fenced(text: str) -> Iterator[str]:
    """The bodies of code fences first (an unclosed fence runs to the end), then the whole text."""
    for m in _FENCE.finditer(text):
        yield m.group(1)
    yield text


def _decode_at(text: str, start: int) -> Any:
    """The JSON value that starts at ``start``, repairing invalid escapes once; raises ValueError."""
    decoder = json.JSONDecoder(strict=False)  # raw control characters inside strings are tolerated
    try:
        return decoder.raw_decode(text, start)[0]
    except json.JSONDecodeError as e:
        if "escape" not in e.msg:
            raise
    return decoder.raw_decode(_BAD_ESCAPE.sub(r"\\\\", text[start:]), 0)[0]


def find_json_object(text: str, required: str) -> tuple[dict[str, Any] | None, str]:
    """The first JSON object in ``text`` that has the field ``required``, or ``None`` and why not."""
    last_error = "no JSON object in the output"
    for body in _fenced(text[:MAX_OUTPUT_CHARS]):
        tried = 0
        for start in (i for i, ch in enumerate(body) if ch == "{"):
            tried += 1
            if tried > MAX_CANDIDATES:
                break
            try:
                obj = _decode_at(body, start)
            except (ValueError, RecursionError) as e:
                last_error = f"malformed or truncated JSON: {str(e)[:120]}"
                continue
            if isinstance(obj, dict) and required in obj:
                return obj, ""
            last_error = f"a JSON object without {required!r}"
    return None, last_error


def salvage_items(text: str, name: str) -> tuple[list[Any], int] | None:
    """The complete items of a list ``{"<name>": [item, item, ...`` cut off before its end (a model that
    ran out of tokens, often repeating one item until it did): the items decoded before the cut, each exact
    repeat once, and how many repeats were left out; None when no item is complete."""
    opening = re.search(r'\{\s*"' + re.escape(name) + r'"\s*:\s*\[', text)
    if opening is None:
        return None
    items: list[Any] = []
    seen: set[str] = set()
    repeats = 0
    pos = opening.end()
    decoder = json.JSONDecoder(strict=False)
    while (m := _BETWEEN.match(text, pos)) and m.end() < len(text) and text[m.end()] != "]":
        try:
            item, pos = decoder.raw_decode(text, m.end())
        except (ValueError, RecursionError):
            break
        fingerprint = json.dumps(item, sort_keys=True)
        if fingerprint in seen:
            repeats += 1
        else:
            seen.add(fingerprint)
            items.append(item)
    return (items, repeats) if items else None


def fact_items(output: str) -> tuple[list[Any] | None, str, tuple[str, ...]]:
    """The items of the answer's ``facts`` list, or None and why not; with a note for the receipt when the
    answer was cut off and only its complete facts were read (:func:`salvage_items`)."""
    obj, why = find_json_object(output, "facts")
    if obj is None:
        salvaged = salvage_items(output[:MAX_OUTPUT_CHARS], "facts")
        if salvaged is None:
            return None, why, ()
        items, repeats = salvaged
        n = len(items)
        again = f" and {repeats} exact repeat{'s' * (repeats != 1)}" if repeats else ""
        return items, "", (f"the rest of the answer: it was cut off after {n} complete fact{'s' * (n != 1)}{again} "
                           "(the model stopped before closing its list)",)
    if not isinstance(obj["facts"], list):
        return None, "'facts' is not a list", ()
    return obj["facts"], "", ()


def _fact_problem(item: Any) -> str | None:
    if not isinstance(item, dict):
        return f"a fact must be an object, got {type(item).__name__}"
    for name in ("key", "value"):
        v = item.get(name)
        if not isinstance(v, str) or not v.strip():
            return f"fact {name!r} missing or empty"
    if len(item["key"]) > MAX_KEY_CHARS:
        return f"fact key over {MAX_KEY_CHARS} characters"
    if len(item["value"].encode("utf-8", "surrogatepass")) > MAX_VALUE_BYTES:
        return f"fact value over {MAX_VALUE_BYTES // 1024} KiB"
    if any("\ud800" <= ch <= "\udfff" for ch in item["key"] + item["value"]):
        return "fact has a lone surrogate (invalid UTF-8)"
    if item.get("status", "asserted") not in STATUSES:
        return f"unknown assertion status {item.get('status')!r}"
    c = item.get("confidence")
    if c is not None and (isinstance(c, bool) or not isinstance(c, int | float) or not 0 <= c <= 1):
        return f"confidence must be a number from 0 to 1, got {c!r}"[:120]
    if item.get("node_type") is not None:
        return node_type_problem(item["node_type"])
    return None


def to_fact(item: dict[str, Any], record: int, text: str, form: str) -> Fact | str:
    """One validated fact from one schema item, or the reason it was dropped."""
    problem = _fact_problem(item)
    if problem is not None:
        return problem
    key = normalize_key(item["key"])
    if not key:
        return f"fact key {item['key'][:60]!r} is empty after normalisation"
    if holds_value(key, item["value"]):
        return f"fact key {key!r} contains its value"
    status: Status = item.get("status", "asserted")
    c = item.get("confidence")
    confidence = CONFIDENCE[status] if c is None else float(c)
    return Fact(key, item["value"].strip(), status, _HINT[status], confidence, record, text, form,
                node_type=item.get("node_type"))


def _what(item: Any) -> str:
    """Which item of the answer a dropped fact was, for its receipt: its key (cut short), or its type."""
    if isinstance(item, dict) and isinstance(item.get("key"), str):
        return f"key {item['key'][:60]!r}"
    if isinstance(item, dict):
        return f"key of type {type(item.get('key')).__name__}"
    return f"a {type(item).__name__}, not an object"


def parse_facts(output: str, record: int, text: str, form: str = "llm") -> Extraction:
    """Facts from a model's answer for one record; ``failed`` and the reason when none are usable."""
    items, why, notes = fact_items(output)
    if items is None:
        return Extraction(record, text, reason=why, failed=True)
    facts: list[Fact] = []
    dropped: list[str] = list(notes)
    for n, item in enumerate(items, 1):
        got = to_fact(item, record, text, form)
        (facts.append(got) if isinstance(got, Fact) else dropped.append(f"fact {n} ({_what(item)}): {got}"))
    if not facts:
        reason = "the model found no facts" if not items else f"every fact was invalid: {dropped[len(notes)]}"
        return Extraction(record, text, reason=reason, dropped=tuple(dropped))
    return Extraction(record, text, facts=tuple(facts), dropped=tuple(dropped))


CLAIMS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "facts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "subject": {"type": "string"},
                    "attribute": {"type": "string"},
                    "value": {"type": "string"},
                    "evidence": {"type": "string"},
                    "status": {"type": "string", "enum": list(STATUSES)},
                },
                "required": ["subject", "attribute", "value", "evidence"],  # status: asserted unless given
                "additionalProperties": False,
            },
        }
    },
    "required": ["facts"],
    "additionalProperties": False,
}
"""The schema of the grounded extractor: who, what, the value, and the words of the record that say so."""


def _candidate(item: dict[str, Any]) -> Candidate:
    """The item as a candidate; an item in the older ``key`` form names its subject in the key, if at all."""
    if isinstance(item.get("attribute"), str) and item["attribute"].strip():
        subject = item.get("subject")
        return Candidate(subject if isinstance(subject, str) else "user", item["attribute"], item["value"],
                         item.get("evidence") if isinstance(item.get("evidence"), str) else None)
    subject, _, attribute = item["key"].rpartition(".")
    return Candidate(subject or "user", attribute, item["value"], None)


def grounded_fact(item: Any, record: int, text: str, said: Utterance | None, form: str) -> Fact | str:
    """One fact whose value the record supports, attributed by the rules of :mod:`.grounding`, or why not."""
    if isinstance(item, dict) and "key" not in item and isinstance(item.get("attribute"), str):
        item = {**item, "key": item["attribute"]}
    fact = to_fact(item, record, text, form)
    if isinstance(fact, str):
        return fact
    c = _candidate(item)
    why = check(c, text, said)
    if why is not None:
        return why
    subject, _ = resolve_subject(c.subject, said, text)
    key = fact_key(subject, c.attribute)
    return replace(fact, key=key) if key else f"no key from subject {c.subject!r} and attribute {c.attribute!r}"


def parse_grounded(output: str, record: int, text: str, said: Utterance | None = None,
                   form: str = "llm") -> Extraction:
    """Facts from a model's answer that pass grounding and attribution; every other candidate on ``dropped``."""
    items, why, notes = fact_items(output)
    if items is None:
        return Extraction(record, text, reason=why, failed=True)
    facts: list[Fact] = []
    dropped: list[str] = list(notes)
    for n, item in enumerate(items, 1):
        got = grounded_fact(item, record, text, said, form)
        if isinstance(got, Fact):
            facts.append(got)
        else:
            what = _what(item) if not isinstance(item, dict) or "key" in item else f"key {item.get('attribute')!r}"[:70]
            dropped.append(f"fact {n} ({what}): {got}")
    if not facts:
        reason = "the model found no facts" if not items else f"every fact was dropped: {dropped[len(notes)]}"
        return Extraction(record, text, reason=reason, dropped=tuple(dropped))
    return Extraction(record, text, facts=tuple(facts), dropped=tuple(dropped))
