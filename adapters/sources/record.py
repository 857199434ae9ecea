"""The input record that every source yields: a text with the evidence fields it brought along."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Record:
    """One input record with the evidence fields it brought along."""

    number: int  # 1-based line number in the input
    text: str | None
    source: str | None = None
    trust: int | None = None
    observed_at: str | None = None
    op_id: str | None = None
    confidence: Any = None  # checked when used: a bad one makes an "invalid observation" receipt
    node_type: Any = None  # replaces the extractor's node types; checked like any operation field
    problem: str | None = None  # why the record could not even be read
    speaker: str | None = None  # who said it, in a dialogue (LoCoMo): first-person keys become theirs
    listeners: tuple[str, ...] = ()  # who it was said to, in a dialogue: facts about them are not theirs to give
    replying_to: str | None = None  # the turn just before in its session, ``Speaker: text`` (context, never evidence)
