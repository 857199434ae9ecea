"""The rule-based annotator: which typed operation a fact becomes, relative to the cell's head (docs/ingest.md).

Rules, first match wins:

1. correction cue (op hint ``reject``, or the record opens with ``Correction:``/``Actually,``/...) -> ``reject v``
2. retraction (status ``withdrawn``, op hint ``revoke``, or "reported in error"/"retract"/"no longer" in
   the record outside the value) -> ``revoke v``
3. hedged, or confidence below 0.6 -> ``contest v`` (the cell asks instead of guessing)
4. ``v`` equals the head -> ``support``
5. otherwise -> ``accept v``

The choice is then validated against the cell, deterministically, with the preconditions of docs/concepts.md
(contest and reject need a head, reject needs a different value, revoke needs ``v`` open). An invalid
choice is not changed into another op: it is written all the same and the domain records it as a
``noop`` event with the reason, so the observation stays in the log.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pmem.domain.extraction.facts import Fact

LOW_CONFIDENCE = 0.6
_CORRECTION_CUE = re.compile(r"\s*(?:\d+\.\s+)?(?:correction\s*:|actually\b|no\s*,\s*wait\b|i was wrong\b)", re.I)
_RETRACTION_CUE = re.compile(r"\b(?:reported in error|retract(?:ed|ion)?|disregard|no longer)\b", re.I)


@dataclass(frozen=True, slots=True)
class CellSnapshot:
    """What the annotator may know of a cell: its head value, state and open alternatives."""

    value: str | None = None
    status: str = "empty"  # empty | active | contested
    alternatives: tuple[str, ...] = ()

    def is_open(self, value: str) -> bool:
        return value == self.value or value in self.alternatives


EMPTY = CellSnapshot()


@dataclass(frozen=True, slots=True)
class Annotation:
    """The op chosen for a fact, why, and whether it passes validation (``invalid`` says why not)."""

    fact: Fact
    op: str  # accept | contest | reject | revoke | support
    why: str
    invalid: str | None = None

    @property
    def valid(self) -> bool:
        return self.invalid is None


def choose(fact: Fact, cell: CellSnapshot) -> tuple[str, str]:
    """The op for ``fact`` on ``cell`` by the rules above, with the reason in words."""
    if fact.op_hint == "reject" or _CORRECTION_CUE.match(fact.text):
        return "reject", "correction cue: the head is recorded as wrong"
    if fact.status == "withdrawn" or fact.op_hint == "revoke" or _RETRACTION_CUE.search(
            fact.text.replace(fact.value, " ")):  # a cue inside the value itself ("famous for No Longer") is none
        return "revoke", "retraction: the value is withdrawn"
    if fact.status == "hedged" or fact.op_hint == "contest" or fact.confidence < LOW_CONFIDENCE:
        return "contest", f"{fact.status} (confidence {fact.confidence:.2f}): held open, not superseding"
    if cell.value is not None and fact.value == cell.value:
        return "support", "same value as the head"
    return "accept", "new value" if cell.value is not None else "first value for the cell"


def validate(op: str, value: str, cell: CellSnapshot) -> str | None:
    """Why ``op value`` cannot apply to ``cell`` (the docs/concepts.md preconditions), or ``None`` if it can."""
    if op in ("contest", "reject", "revoke") and cell.value is None:
        return f"{op} needs a head: the cell is empty"
    if op == "reject" and value == cell.value:
        return "reject value equals head"
    if op == "revoke" and not cell.is_open(value):
        return f"revoke target {value!r} is not open"
    return None


def annotate(fact: Fact, cell: CellSnapshot) -> Annotation:
    """Choose and validate the op for ``fact`` given the cell as it is now."""
    op, why = choose(fact, cell)
    return Annotation(fact, op, why, validate(op, fact.value, cell))
