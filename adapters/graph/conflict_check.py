"""The pre-write conflict check over a store: neighbours from the store, the rules from
:mod:`projections.conflicts`, the result on the receipt.

The neighbours are the cell's own head (when it has one) and the nearest cells by vector search over
``key: value``, five in all. A write whose checked confidence is below 0.6 is recorded as a
``contest`` (when the cell has a head to contest) instead of superseding, so the cell asks for
clarification instead of guessing (docs/ingest.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pmem.projections.conflicts import DEFAULT_CONFIDENCE, CheckResult, Judge, Neighbour, check


def neighbours(store: Any, key: str, value: str, k: int = 5) -> list[Neighbour]:
    """The cell's head first, then the nearest other cells, ``k`` in all."""
    out: list[Neighbour] = []
    head = store.get(key)
    if head.value is not None:
        out.append(Neighbour(head.key, head.value, 1.0))
        out += [Neighbour(head.key, alt, 1.0) for alt in head.alternatives]
    if store.last_index() > 0:
        for r in store.search(f"{key}: {value}", k):
            if r.cell.key != head.key and r.cell.value is not None:
                out.append(Neighbour(r.cell.key, r.cell.value, r.score))
    return out[:k]


def precheck(store: Any, key: str, value: str, *, confidence: float = DEFAULT_CONFIDENCE,
             judge: Judge | None = None, exclusive: Iterable[tuple[str, str]] = ()) -> CheckResult:
    """The conflicts ``key = value`` would have with what the store holds now (writes nothing)."""
    return check(key, value, neighbours(store, key, value), confidence=confidence, judge=judge,
                 exclusive=exclusive)


def checked_write(store: Any, key: str, value: str, *, confidence: float = DEFAULT_CONFIDENCE,
                  judge: Judge | None = None, exclusive: Iterable[tuple[str, str]] = (),
                  **evidence: Any) -> dict[str, Any]:
    """Check, then write: ``accept``, or ``contest`` when the checked confidence is below 0.6 and
    the cell has a head. The receipt (as a dict) carries the check under ``"check"``."""
    result = precheck(store, key, value, confidence=confidence, judge=judge, exclusive=exclusive)
    has_head = store.get(key).value is not None
    write = store.contest if result.contest and has_head else store.accept
    receipt: dict[str, Any] = write(key, value, **evidence).to_dict()
    receipt["check"] = result.to_dict()
    return receipt
