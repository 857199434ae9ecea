"""The LLM extractor and the LLM annotator (docs/ingest.md), both through :class:`pmem.adapters.llm.client.JsonModel`.

The model only proposes; deterministic code decides what is kept. The extractor's answer is read by
:func:`domain.extraction.llm_output.parse_facts`; an answer still unusable after the retries becomes an
``Extraction`` with ``failed=True`` and the reason, which ingest records in the log as a ``noop`` event.
The annotator's op is checked against the cell with the same validation as the rule-based one
(:func:`domain.extraction.annotate.validate`), a low-confidence fact may not supersede, and an unusable
answer falls back to the rule-based choice, saying so in the reason.
"""

from __future__ import annotations

from typing import Any

from pmem.adapters.llm.client import JsonModel, LlmSettings
from pmem.domain.extraction.annotate import LOW_CONFIDENCE, Annotation, CellSnapshot, annotate, validate
from pmem.domain.extraction.facts import Extraction, Fact
from pmem.domain.extraction.key_identity import same_key, settled_without_judge
from pmem.domain.extraction.llm_output import FACTS_SCHEMA, find_json_object, parse_facts

EXTRACT_PROMPT = """You extract durable facts from one record for an agent's memory.
Answer with one JSON object {"facts": [{"key", "value", "status", "confidence", "node_type"}]} and nothing
else.
- key: a short snake_case name for the slot, independent of the value (personal_best_5k_time, never
  personal_best_27_12); for a fact about something other than the user, prefix its subject
  (france.capital).
- value: the value as stated.
- status: asserted (stated as true), hedged (uncertain: "I think", "maybe"), reported (someone else
  says so) or withdrawn (the record retracts it).
- confidence: 0 to 1.
- node_type: what the fact is about: event (something that happened or is dated: a birth, a move, a
  meeting), relationship (a tie between two parties: spouse, employer, author, owner) or persona (an
  attribute or preference of one party).
A record with no durable fact gives {"facts": []}."""

ANNOTATE_PROMPT = """You choose how a new observation changes a memory cell.
Answer with one JSON object {"op": ..., "why": ...} and nothing else. op is one of:
accept (new current value), contest (plausible but uncertain: keep both open), reject (the current value
was wrong; this replaces it), revoke (the observation retracts the value), support (same as current)."""

OPS = ("accept", "contest", "reject", "revoke", "support")
ANNOTATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"op": {"type": "string", "enum": list(OPS)}, "why": {"type": "string"}},
    "required": ["op", "why"],
    "additionalProperties": False,
}


class LlmExtractor:
    """Records -> facts by asking a model; never raises, never drops a record silently."""

    name = "llm"

    def __init__(self, settings: LlmSettings) -> None:
        self.model = JsonModel(settings)

    def extract(self, text: str, record: int) -> Extraction:
        """The facts of one record, or (``failed``) why the model's answers could not be used."""
        if not text.strip():
            return Extraction(record, text, reason="empty record")

        def parse(answer: str) -> tuple[Extraction | None, str]:
            x = parse_facts(answer, record, text)
            return (None, x.reason or "unusable") if x.failed else (x, "")

        result = self.model.ask(EXTRACT_PROMPT, text, FACTS_SCHEMA, "facts", parse)
        if result.value is not None:
            extraction: Extraction = result.value
            return extraction
        return Extraction(record, text, reason=result.reason, failed=True)


def _cell_text(cell: CellSnapshot) -> str:
    if cell.value is None:
        return "The cell is empty."
    alts = f"; open alternatives: {list(cell.alternatives)}" if cell.alternatives else ""
    return f"Current value: {cell.value!r} ({cell.status}){alts}."


def _read_op(answer: str) -> tuple[tuple[str, str] | None, str]:
    obj, why = find_json_object(answer, "op")
    if obj is None:
        return None, why
    op = obj["op"]
    if op not in OPS:
        return None, f"unknown op {str(op)[:40]!r}"
    why_text = obj.get("why")
    return (op, why_text[:300] if isinstance(why_text, str) and why_text.strip() else "chosen by the model"), ""


class LlmAnnotator:
    """Chooses the op with a model; the choice is validated deterministically, as every annotator's is."""

    def __init__(self, settings: LlmSettings) -> None:
        self.model = JsonModel(settings)

    def __call__(self, fact: Fact, cell: CellSnapshot) -> Annotation:
        user = (f"{_cell_text(cell)}\nObservation: {fact.text}\nExtracted: {fact.key} = {fact.value!r} "
                f"(status {fact.status}, confidence {fact.confidence:.2f})")
        result = self.model.ask(ANNOTATE_PROMPT, user, ANNOTATION_SCHEMA, "annotation", _read_op)
        if result.value is None:
            rule = annotate(fact, cell)
            return Annotation(fact, rule.op, f"{result.reason}; rule-based: {rule.why}", rule.invalid)
        op, why = result.value
        if op in ("accept", "reject") and fact.confidence < LOW_CONFIDENCE:
            op, why = "contest", f"{why} (lowered to contest: confidence {fact.confidence:.2f} < {LOW_CONFIDENCE})"
        return Annotation(fact, op, f"llm: {why}", validate(op, fact.value, cell))


JUDGE_PROMPT = """Two memory keys name fact slots. Do they name the same slot (the same attribute of the same
subject)? You see only the key names. Answer with one JSON object {"same": true|false, "why": ...}."""
JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"same": {"type": "boolean"}, "why": {"type": "string"}},
    "required": ["same", "why"],
    "additionalProperties": False,
}


def _read_same(answer: str) -> tuple[tuple[bool, str] | None, str]:
    obj, why = find_json_object(answer, "same")
    if obj is None:
        return None, why
    if not isinstance(obj["same"], bool):
        return None, "'same' must be true or false"
    text = obj.get("why")
    return (obj["same"], text[:200] if isinstance(text, str) else ""), ""


class LlmKeyJudge:
    """Same slot or not for two key names (never values), by a model; the deterministic check if unusable."""

    def __init__(self, settings: LlmSettings) -> None:
        self.model = JsonModel(settings)

    def __call__(self, a: str, b: str) -> tuple[bool, str]:
        settled = settled_without_judge(a, b)
        if settled is not None:  # a model is asked only what the rules cannot settle
            return settled
        result = self.model.ask(JUDGE_PROMPT, f"key A: {a}\nkey B: {b}", JUDGE_SCHEMA, "same_key", _read_same)
        if result.value is None:
            same, why = same_key(a, b)
            return same, f"{result.reason}; deterministic: {why}"
        same, why = result.value
        return same, f"llm: {why or ('same' if same else 'different')}"
