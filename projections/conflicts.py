"""Pre-write conflict check (docs/graph.md): an incoming fact against its nearest stored neighbours.

Pure. Three kinds, each with its reason:

- ``numerical``: a neighbour with the same key whose value is a number differing beyond a relative
  tolerance (``"42 kg"`` against ``"48 kg"``); units and other words must match;
- ``semantic``: a :class:`Judge` decides when one is configured (an LLM, for instance); otherwise a
  rule: same key, and one value negates the other (``"vegan"`` / ``"not vegan"``, ``yes`` / ``no``);
- ``logical``: declared constraints, pairs of ``key=value`` that cannot both hold (mutually exclusive).

The check's confidence is the observation's own confidence, scaled by :data:`CONFLICT_FACTOR` when
anything conflicts; below :data:`CONTEST_BELOW` the write becomes a contest instead of a supersession.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from pmem.domain.keys import normalize_key

CONTEST_BELOW = 0.6
CONFLICT_FACTOR = 0.6
DEFAULT_CONFIDENCE = 0.9
TOLERANCE = 0.05  # relative
_NUMBER = re.compile(r"[-+]?\d+(?:[.,]\d+)?")
_OPPOSITES = {frozenset(p) for p in (("yes", "no"), ("true", "false"), ("alive", "dead"), ("on", "off"),
                                      ("married", "single"), ("open", "closed"), ("allowed", "forbidden"))}
_NEGATION = re.compile(r"(?:not|no longer|never|no)\s+(.+)", re.I)


@dataclass(frozen=True, slots=True)
class Neighbour:
    key: str
    value: str
    score: float = 1.0


@dataclass(frozen=True, slots=True)
class Conflict:
    kind: str  # numerical | semantic | logical
    key: str
    value: str
    reason: str


@dataclass(frozen=True, slots=True)
class CheckResult:
    conflicts: tuple[Conflict, ...]
    confidence: float
    neighbours: tuple[Neighbour, ...] = field(default=())

    @property
    def contest(self) -> bool:
        return self.confidence < CONTEST_BELOW

    def to_dict(self) -> dict[str, object]:
        return {"confidence": round(self.confidence, 4), "contest": self.contest,
                "neighbours": [{"key": n.key, "value": n.value, "score": round(n.score, 4)} for n in self.neighbours],
                "conflicts": [{"kind": c.kind, "key": c.key, "value": c.value, "reason": c.reason}
                              for c in self.conflicts]}


class Judge(Protocol):
    """Decides semantic conflict between two facts: ``(conflicts?, reason)``."""

    def judge(self, key: str, value: str, other_key: str, other_value: str) -> tuple[bool, str]: ...


def numbers(text: str) -> tuple[list[float], str]:
    """The numbers in ``text`` and what is left around them (the unit and other words)."""
    found = [float(m.replace(",", ".")) for m in _NUMBER.findall(text)]
    return found, _NUMBER.sub("#", text).strip().lower()


def numerical(value: str, other: str, tolerance: float = TOLERANCE) -> str | None:
    a, rest_a = numbers(value)
    b, rest_b = numbers(other)
    if len(a) != 1 or len(b) != 1 or rest_a != rest_b:
        return None
    x, y = a[0], b[0]
    if abs(x - y) > tolerance * max(abs(x), abs(y)):
        return f"{value!r} and {other!r} differ by more than {tolerance:.0%}"
    return None


def negates(value: str, other: str) -> bool:
    a, b = value.strip().lower(), other.strip().lower()
    if frozenset((a, b)) in _OPPOSITES:
        return True
    for x, y in ((a, b), (b, a)):
        m = _NEGATION.fullmatch(x)
        if m is not None and m.group(1).strip() == y:
            return True
    return False


def check(key: str, value: str, neighbours: Sequence[Neighbour], *, confidence: float = DEFAULT_CONFIDENCE,
          judge: Judge | None = None, exclusive: Iterable[tuple[str, str]] = (),
          tolerance: float = TOLERANCE) -> CheckResult:
    """Compare ``key = value`` with ``neighbours`` (at most the nearest 5 are read)."""
    k = normalize_key(key)
    near = tuple(neighbours[:5])
    found: list[Conflict] = []
    pairs = {frozenset((_kv(a), _kv(b))) for a, b in exclusive}
    for n in near:
        nk = normalize_key(n.key)
        if nk == k and n.value != value:
            reason = numerical(value, n.value, tolerance)
            if reason is not None:
                found.append(Conflict("numerical", n.key, n.value, reason))
        semantic = _semantic(k, value, nk, n, judge)
        if semantic is not None:
            found.append(Conflict("semantic", n.key, n.value, semantic))
        if frozenset((_kv(f"{k}={value}"), _kv(f"{nk}={n.value}"))) in pairs:
            found.append(Conflict("logical", n.key, n.value, f"{k}={value} and {nk}={n.value} are declared "
                                                             "mutually exclusive"))
    conf = confidence * (CONFLICT_FACTOR if found else 1.0)
    return CheckResult(tuple(found), conf, near)


def _semantic(k: str, value: str, nk: str, n: Neighbour, judge: Judge | None) -> str | None:
    if judge is not None:
        if nk == k and n.value == value:
            return None
        conflicts, reason = judge.judge(k, value, nk, n.value)
        return reason if conflicts else None
    if nk == k and negates(value, n.value):
        return f"{value!r} negates {n.value!r}"
    return None


def _kv(text: str) -> str:
    key, _, value = text.partition("=")
    return f"{normalize_key(key)}={value.strip().lower()}"
