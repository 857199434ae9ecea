"""What extraction produces (docs/ingest.md): facts with an assertion status, or the reason a record gave none.

Key scheme (value-independent, docs/concepts.md-normalised): ``<subject>.<attribute>``. The subject slug is
the subject folded to ASCII (``Zürich`` -> ``zurich``) with every other character run, dots included,
made ``_``, so the one dot is the separator: ``France`` + capital -> ``france.capital``,
``mug 1`` + location -> ``mug_1.location``. A personal statement about the user ("my X is now Y")
has no subject part: ``X`` alone (``my 5K PB`` -> ``5k_pb``), since a shared ``user.`` prefix would
only crowd the key's embedding.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Literal

from pmem.domain.keys import normalize_key

Status = Literal["asserted", "hedged", "reported", "withdrawn"]
OpHint = Literal["accept", "reject", "revoke", "contest"]
STATUSES: tuple[Status, ...] = ("asserted", "hedged", "reported", "withdrawn")

CONFIDENCE = {"asserted": 0.9, "reported": 0.7, "hedged": 0.5, "withdrawn": 0.9}
"""Default confidence per assertion status; below 0.6 an annotator contests instead of superseding."""


@dataclass(frozen=True, slots=True)
class Fact:
    """One ``{key, value}`` observation taken from a record, with how firmly the record states it."""

    key: str
    value: str
    status: Status
    op_hint: OpHint
    confidence: float
    record: int  # 1-based number of the record it came from
    text: str  # the record itself (the evidence)
    form: str  # which pattern matched, e.g. ``cloze:P36``, ``alfworld.move``, ``statement``
    previous: str | None = None  # a value the record says was replaced (e.g. the "from" of a move)
    node_type: str | None = None  # graph node type (domain.node_types); None: the rule-based default


@dataclass(frozen=True, slots=True)
class Extraction:
    """The result for one record: its facts, or (never silently) the reason it gave none."""

    record: int
    text: str
    facts: tuple[Fact, ...] = ()
    reason: str | None = None
    failed: bool = False  # the extractor could not read the record (e.g. unusable model output)
    dropped: tuple[str, ...] = ()  # why each fact the extractor rejected was rejected


def ascii_fold(text: str) -> str:
    """Drop accents so ``São Paulo`` and ``Sao Paulo`` name the same subject."""
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


def subject_slug(subject: str) -> str:
    """The subject part of a key: folded, normalised, with no dots (``Washington, D.C.`` -> ``washington_d_c``)."""
    return normalize_key(ascii_fold(subject).replace(".", " "))


def subject_key(subject: str, attribute: str) -> str:
    """``<subject>.<attribute>``, or ``""`` when the subject has no usable characters."""
    s = subject_slug(subject)
    return f"{s}.{attribute}" if s else ""


def speaker_key(speaker: str, key: str) -> str:
    """A first-person key (no subject part) said by ``speaker`` in a dialogue: ``<speaker>.<key>``.
    A key that already names its subject, or a speaker with no usable characters, is left as it is."""
    slug = subject_slug(speaker)
    return key if "." in key or not slug else f"{slug}.{key}"


def personal_key(attribute: str) -> str:
    """The key of a statement about the user's own ``attribute``: the key rule alone, so ``"My café is
    now Paris."`` writes the cell that ``get café`` reads. (Subjects are folded, see :func:`subject_slug`:
    an entity is spelled with and without accents across a stream, a user's own attribute is not.)"""
    return normalize_key(attribute)
