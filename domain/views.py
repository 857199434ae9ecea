"""Typed results the API returns: receipts for writes, cell views and histories for reads (docs/python-api.md).

Each has ``to_dict()`` giving exactly the JSON the ``pmem`` CLI prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple


class Head(NamedTuple):
    value: str
    status: str

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "status": self.status}


class Receipt(NamedTuple):
    """What one operation did: the event it became, whether it changed the cell, and the head after it.

    (A named tuple: a batch returns one per operation.)
    """

    event_index: int
    namespace: str
    key: str
    op: str  # the op applied: accept|contest|reject|revoke|resolve|support|noop
    requested: str  # the op that was sent
    applied: bool
    reason: str | None
    head: Head | None
    op_id: str | None = None
    duplicate: bool = False  # True when op_id had been seen: nothing new was appended

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"event_index": self.event_index, "key": self.key, "op": self.op,
                             "applied": self.applied}
        if self.reason is not None:
            d["reason"] = self.reason
        d["head"] = None if self.head is None else self.head.to_dict()
        d["namespace"] = self.namespace
        d["requested"] = self.requested
        if self.op_id is not None:
            d["op_id"] = self.op_id
        if self.duplicate:
            d["duplicate"] = True
        return d


@dataclass(frozen=True, slots=True)
class VersionView:
    """One version with its open intervals ``[(opened_at, closed_at | None), ...]`` in event indices."""

    vid: int
    value: str
    status: str
    supersedes: int | None
    alternative_of: int | None
    intervals: tuple[tuple[int, int | None], ...]
    trust: int
    support: int
    sources: tuple[str, ...]
    evidence: tuple[int, ...]  # event indices of the events that created or supported it

    @property
    def opened_at(self) -> int:
        return self.intervals[0][0]

    @property
    def closed_at(self) -> int | None:
        return self.intervals[-1][1]

    def to_dict(self) -> dict[str, Any]:
        return {
            "value": self.value, "status": self.status, "supersedes": self.supersedes,
            "opened_at": self.opened_at, "closed_at": self.closed_at,
            "vid": self.vid, "alternative_of": self.alternative_of,
            "intervals": [list(i) for i in self.intervals],
            "trust": self.trust, "support": self.support, "sources": list(self.sources),
            "evidence": list(self.evidence),
        }


@dataclass(frozen=True, slots=True)
class CellView:
    """A cell read current-value-first, with optional disclosures (docs/reading.md)."""

    namespace: str
    key: str
    value: str | None
    status: str  # empty | active | contested
    alternatives: tuple[str, ...] = ()
    versions: tuple[VersionView, ...] = field(default=(), repr=False)
    disclose: frozenset[str] = frozenset()

    @property
    def head(self) -> VersionView | None:
        return next((v for v in self.versions if v.status in ("active", "contested")), None)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"key": self.key, "value": self.value, "status": self.status,
                             "alternatives": list(self.alternatives), "namespace": self.namespace}
        if "history" in self.disclose:
            closed = [v for v in self.versions if v.closed_at is not None]
            closed.sort(key=lambda v: v.closed_at or 0, reverse=True)
            d["history"] = [{"value": v.value, "status": v.status, "closed_at": v.closed_at,
                             "opened_at": v.opened_at} for v in closed]
        if "alternatives" in self.disclose:
            d["alternative_versions"] = [
                {"value": v.value, "trust": v.trust, "support": v.support, "sources": list(v.sources),
                 "opened_at": v.intervals[-1][0]}
                for v in self.versions if v.status == "alternative"]
        if "support" in self.disclose:
            h = self.head
            d["support"] = None if h is None else {"count": h.support, "trust": h.trust,
                                                   "sources": list(h.sources)}
        return d


@dataclass(frozen=True, slots=True)
class History:
    namespace: str
    key: str
    versions: tuple[VersionView, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "namespace": self.namespace, "versions": [v.to_dict() for v in self.versions]}
