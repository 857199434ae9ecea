"""The verification pass of the LLM extractor (docs/ingest.md#verification): a second, blind look at each fact.

A grounded fact can still be a short phrase of the record under a loose attribute (``family = loved
ones``). Asked "is that so?", a small model says yes to nearly anything; asked the question the fact
answers, without being shown the value ("according to this message, what is Caroline's family?"), it
answers from the message, and a fact whose value is not in that answer is dropped. This module builds
the question and compares the answer; the adapter asks. Nothing here does I/O.
"""

from __future__ import annotations

from typing import Any

from pmem.domain.extraction.facts import Fact, subject_slug
from pmem.domain.extraction.grounding import Utterance, content
from pmem.domain.extraction.slots import SLOT_FORM, slot_question

NOT_STATED = "not stated"

VERIFY_PROMPT = f"""You answer one question about one message of a conversation. Answer with words copied from
the message. If the message does not say the answer, answer "{NOT_STATED}". Answer with one JSON object
{{"answer": "..."}}."""

VERIFY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}
"""One short answer: the words of the message that answer the question, or :data:`NOT_STATED`."""

MAX_ANSWER_TOKENS = 100
"""The bound on a verification answer: a few words of the message; a longer one is a loop, cut and retried."""

MIN_AGREEMENT = 0.5
"""The share of the value's content words the blind answer must hold. The answer is often a longer span
or a sentence around the value ("counseling or working in mental health" for ``counseling``), so the
value is looked for in the answer, not the answer in the value; half, as a list value ("running,
reading, or playing my violin") is often answered in part."""


def subject_name(fact: Fact, said: Utterance | None) -> str:
    """Who the fact is about, as a question names them: the speaker's own name, the user of a plain record,
    else the key's subject part in words."""
    subject, dot, _ = fact.key.partition(".")
    if not dot:
        return said.speaker if said is not None else "the user"
    if said is not None and subject == subject_slug(said.speaker):
        return said.speaker
    return subject.replace("_", " ")


def question(fact: Fact, said: Utterance | None) -> str:
    """The question the fact answers, without its value: a slot's own question for a slot's fact (a slot
    name alone, "what is Caroline's activities?", asks less than the slot holds)."""
    attribute = fact.key.rpartition(".")[2]
    asked = slot_question(attribute, subject_name(fact, said)) if fact.form == SLOT_FORM else None
    asked = asked or f"what is {subject_name(fact, said)}'s {attribute.replace('_', ' ')}"
    return f"Question: according to this message, {asked}?"


def read_answer(obj: dict[str, Any]) -> tuple[str | None, str]:
    """The answer of a verification reply already parsed as JSON, or ``None`` and why it is unusable."""
    answer = obj.get("answer")
    if not isinstance(answer, str) or not answer.strip():
        return None, "'answer' must be a non-empty string"
    return answer.strip()[:400], ""


def disagreement(value: str, answer: str) -> str | None:
    """Why the blind answer does not confirm ``value`` (``None`` when it does)."""
    want = content(value)
    shown = repr(answer[:80])
    if answer.strip().strip(".").lower() == NOT_STATED:
        return f"not confirmed: asked blind, the model found no answer in the record ({shown})"
    if want and len(want & content(answer)) < MIN_AGREEMENT * len(want):
        return f"not confirmed: asked blind, the model answered {shown}"
    return None
