"""The LLM extractor and the LLM annotator (docs/ingest.md), both through :class:`pmem.adapters.llm.client.JsonModel`.

The model only proposes; deterministic code decides what is kept. The extractor's answer is read by
:func:`domain.extraction.llm_output.parse_grounded`, which keeps only the facts the record itself
supports, attributed to who said them (:mod:`domain.extraction.grounding`); an answer still unusable
after the retries becomes an ``Extraction`` with ``failed=True`` and the reason, which ingest records in
the log as a ``noop`` event.
With ``verify`` (the default), each fact that passed grounding is asked about once more, blind
(:mod:`domain.extraction.verification`): a fact the model's answer does not confirm is dropped, with the
reason, like any other dropped candidate.
``slots`` says when the slot card (:mod:`domain.extraction.slots`) is asked as well; by default (``both``)
for every record after the free-form pass, its facts verified by each slot's own question, a value the
free-form pass already wrote for the same person dropped as a repeat (docs/ingest.md#slots).
The annotator's op is checked against the cell with the same validation as the rule-based one
(:func:`domain.extraction.annotate.validate`), a low-confidence fact may not supersede, and an unusable
answer falls back to the rule-based choice, saying so in the reason.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pmem.adapters.llm.client import JsonModel, LlmSettings
from pmem.domain.extraction.annotate import LOW_CONFIDENCE, Annotation, CellSnapshot, annotate, validate
from pmem.domain.extraction.facts import Extraction, Fact
from pmem.domain.extraction.grounding import Utterance, content, states_nothing
from pmem.domain.extraction.key_identity import same_key, settled_without_judge
from pmem.domain.extraction.llm_output import CLAIMS_SCHEMA, find_json_object, parse_grounded
from pmem.domain.extraction.slot_modes import DEFAULT_SLOT_MODE, SLOT_MODES
from pmem.domain.extraction.slots import SLOT_PROMPT, SLOT_SCHEMA, parse_slots
from pmem.domain.extraction.verification import (
    MAX_ANSWER_TOKENS,
    VERIFY_PROMPT,
    VERIFY_SCHEMA,
    disagreement,
    question,
    read_answer,
)

EXTRACT_PROMPT = """You read one message of a conversation and list the lasting facts it states about people,
for a long-term memory. Answer with one JSON object {"facts": [...]} and nothing else. Each fact has:
- subject: who the fact is about: the speaker's name for what the speaker says about themselves
  (I, my, me, we), otherwise the name of the person or thing as the message names it;
- attribute: a short snake_case name of one to three words for the kind of fact, never the value itself;
- value: a name or short phrase copied word for word from the message, not a whole sentence;
- evidence: the exact words of the message that state the fact;
- status: asserted (stated as true), hedged (I think, maybe), reported (someone else says so) or withdrawn
  (the message takes it back).
Lasting facts are who someone is, their family and relations, work and studies, places, possessions,
hobbies, plans, and events they took part in, with their dates. Feelings, moods, opinions, thanks,
praise, agreement, questions and greetings are not facts. Say nothing about the listener. Do not guess:
a value that is not in the message is wrong. With no fact, answer {"facts": []}."""

REPLY_NOTE = """
A line "In reply to:" before the message is the turn it answers: read it only to understand the message
(what a short answer is about). Every value must come from the message itself, never from that line."""
"""Added to each prompt when the turn before is shown (``reply_context``): it is context, never a source."""

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

    def __init__(self, settings: LlmSettings, verify: bool = True, slots: str = DEFAULT_SLOT_MODE,
                 reply_context: bool = False) -> None:
        if slots not in SLOT_MODES:
            raise ValueError(f"slots must be one of {', '.join(SLOT_MODES)}, got {slots!r}")
        self.model = JsonModel(settings)
        self.verify = verify
        self.slots = slots
        self.reply_context = reply_context  # show the turn a turn answers (docs/ingest.md#reply-context)

    def message(self, text: str, said: Utterance | None) -> str:
        return message(text, said, self.reply_context)

    def prompt(self, prompt: str) -> str:
        return prompt + REPLY_NOTE if self.reply_context else prompt

    def extract(self, text: str, record: int, said: Utterance | None = None) -> Extraction:
        """The grounded facts of one record, or (``failed``) why the model's answers could not be used.
        A record of only questions, greetings and reactions is not sent to the model at all."""
        if not text.strip():
            return Extraction(record, text, reason="empty record")
        nothing = states_nothing(text)
        if nothing is not None:
            return Extraction(record, text, reason=nothing)

        first = None if self.slots == "only" else self.ask(text, record, said, EXTRACT_PROMPT, CLAIMS_SCHEMA)
        if first is not None and (self.slots == "off" or (first.facts and self.slots == "fallback")):
            return one_value_per_key(first)
        second = self.ask(text, record, said, SLOT_PROMPT, SLOT_SCHEMA, check=False)
        second = self.checked(second if first is None else without_repeats(second, first), said)
        return one_value_per_key(second if first is None else merged(first, second))

    def ask(self, text: str, record: int, said: Utterance | None, prompt: str, schema: dict[str, Any],
            check: bool = True) -> Extraction:
        """One pass (free-form facts, or the slot card), grounded, then (``check``) verified when asked to be."""
        slots = schema is SLOT_SCHEMA

        def parse(answer: str) -> tuple[Extraction | None, str]:
            x = parse_slots(answer, record, text, said) if slots else parse_grounded(answer, record, text, said)
            return (None, x.reason or "unusable") if x.failed else (x, "")

        result = self.model.ask(self.prompt(prompt), self.message(text, said), schema, "slots" if slots else "facts",
                                parse)
        if result.value is not None:
            extraction: Extraction = result.value
            return self.checked(extraction, said) if check else extraction
        return Extraction(record, text, reason=result.reason, failed=True)

    def checked(self, x: Extraction, said: Utterance | None) -> Extraction:
        """``x`` after the verification pass, when it is on and there is anything to verify."""
        return self.verified(x, said) if self.verify and x.facts else x

    def verified(self, x: Extraction, said: Utterance | None) -> Extraction:
        """``x`` without the facts a blind question does not confirm; each of them on ``dropped``, with why."""
        kept: list[Fact] = []
        dropped = list(x.dropped)
        for fact in x.facts:
            why = self.doubt(fact, said)
            (dropped.append(f"fact {fact.key!r} = {fact.value[:60]!r}: {why}") if why else kept.append(fact))
        if kept:
            return replace(x, facts=tuple(kept), dropped=tuple(dropped))
        return replace(x, facts=(), dropped=tuple(dropped), reason=f"every fact was dropped: {dropped[-1]}")

    def doubt(self, fact: Fact, said: Utterance | None) -> str | None:
        """Why the model, asked the fact's question without its value, does not confirm it; ``None`` if it does.
        An answer still unusable after the retries drops the fact too: an unchecked fact is not written."""
        asked = f"{self.message(fact.text, said)}\n\n{question(fact, said)}"
        result = self.model.ask(self.prompt(VERIFY_PROMPT), asked, VERIFY_SCHEMA, "answer", _read_verification,
                                MAX_ANSWER_TOKENS)
        if result.value is None:
            return f"unverified: {result.reason}"
        return disagreement(fact.value, result.value)


def same_fact(fact: Fact) -> tuple[str, frozenset[str]]:
    """A fact's person and its value's content words: the same for one fact said twice, under any attribute.
    A key without a person (a record nobody is named as saying: the user's own note) is about the user."""
    person, dot, _ = fact.key.partition(".")
    return person if dot else "", frozenset(content(fact.value))


def without_repeats(second: Extraction, first: Extraction) -> Extraction:
    """``second`` without the facts giving a value ``first`` already has for the same person (not asked about
    again), each on ``dropped``."""
    seen = {same_fact(f) for f in first.facts}
    again = [f for f in second.facts if same_fact(f) in seen]
    if not again:
        return second
    dropped = second.dropped + tuple(f"fact {f.key!r} = {f.value[:60]!r}: the first pass wrote the same value"
                                     for f in again)
    return replace(second, facts=tuple(f for f in second.facts if f not in again), dropped=dropped)


def one_value_per_key(x: Extraction) -> Extraction:
    """``x`` with one fact per key, the first the model gave, and each later one on ``dropped``, with why.

    A model's facts about one record are a set, not a sequence: a second value for the same key is not an
    update, yet written after the first it would supersede it, and the cell's current value would be
    whichever the model happened to list last (``gift = necklace``, then ``grandma``, then ``Sweden``, for
    one sentence about a necklace from a grandmother in Sweden). The first is kept: it is the one the
    model put forward (docs/ingest.md#one-value-per-key)."""
    kept: dict[str, Fact] = {}
    later: list[Fact] = []
    for fact in x.facts:
        if fact.key in kept:
            later.append(fact)
        else:
            kept[fact.key] = fact
    if not later:
        return x
    dropped = x.dropped + tuple(
        f"fact {f.key!r} = {f.value[:60]!r}: the record already gave {f.key!r} the value "
        f"{kept[f.key].value[:60]!r} (one value per key from a record: the first is kept)" for f in later)
    return replace(x, facts=tuple(kept.values()), dropped=dropped)


def merged(first: Extraction, second: Extraction) -> Extraction:
    """Both passes' facts and drops, as one extraction of the record."""
    dropped = first.dropped + second.dropped
    if first.facts or second.facts:
        return replace(first, facts=first.facts + second.facts, dropped=dropped, reason=None, failed=False)
    reasons = "; slots: ".join(r for r in (first.reason, second.reason) if r)
    return replace(first, dropped=dropped, reason=reasons or None)


def message(text: str, said: Utterance | None, reply: bool = False) -> str:
    """The model's input: the date, who speaks to whom, (``reply``) the turn this one answers, and the
    message itself."""
    if said is None:
        return f"Speaker: the user\nMessage: {text}"
    to = f" (talking to {', '.join(said.listeners)})" if said.listeners else ""
    when = f"Date: {said.when[:10]}\n" if said.when else ""
    before = f"In reply to: {said.replying_to}\n" if reply and said.replying_to else ""
    return f"{when}{before}Speaker: {said.speaker}{to}\nMessage: {text}"


def _read_verification(answer: str) -> tuple[str | None, str]:
    obj, why = find_json_object(answer, "answer")
    return (None, why) if obj is None else read_answer(obj)


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
