"""The vector projection's pure part: which versions get a vector, and when each is open (docs/concepts.md).

Every version ever created gets a vector id, a dense integer assigned in event-index order of
creation (so replaying the log from index 1 assigns the same ids). A version is embedded as
:func:`version_text`. Its open intervals are exactly those of :class:`projections.replay.Timeline`
(the reference fold): this module drives Timelines and reads their intervals back, so the
eligibility the index uses cannot drift from the reference.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from pmem.domain.cell import CellEvent
from pmem.domain.state import OPEN, CellState
from pmem.domain.views import CellView
from pmem.projections.replay import IndexedEvent, Timeline, fold

Span = tuple[int, int | None]  # (opened_at, closed_at or None): open after opened_at, closed after closed_at


def version_text(key: str, value: str) -> str:
    """The string a version is embedded as: docs/reading.md ``key: value``, underscores in the key read as
    spaces (``5k_pb`` holding ``25:50`` gives ``"5k pb: 25:50"``)."""
    return f"{key.replace('_', ' ')}: {value}"


@dataclass(frozen=True, slots=True)
class NewVector:
    """A version created by the folded events, with the vector id it gets."""

    vector_id: int
    cell: UUID
    vid: int
    namespace: str
    key: str
    text: str


@dataclass(slots=True)
class VectorFold:
    """Folds the events after a position into new vectors and the intervals of the cells they touch.

    ``timelines`` holds, for each cell the new events touch, the fold of its events up to the
    position (cells without earlier events may be absent); ``next_id`` is the first unused vector id.
    """

    timelines: dict[UUID, Timeline]
    next_id: int
    new: list[NewVector] = field(default_factory=list)
    touched: set[UUID] = field(default_factory=set)

    def apply(self, index: int, event: CellEvent) -> None:
        cid = event.originator_id
        t = self.timelines.get(cid)
        if t is None:
            t = self.timelines[cid] = Timeline(CellState(event.namespace, event.key))
        before = len(t.state.versions)
        t.apply(index, event)
        self.touched.add(cid)
        for v in t.state.versions[before:]:
            self.new.append(NewVector(self.next_id, cid, v.vid, event.namespace, event.key,
                                      version_text(event.key, v.value)))
            self.next_id += 1

    def apply_all(self, events: Iterable[IndexedEvent]) -> None:
        for index, event in events:
            self.apply(index, event)

    def spans(self, cid: UUID) -> dict[int, list[Span]]:
        """Open intervals of every version of a cell, by vid."""
        return {vid: [(int(o or 0), c) for o, c in spans]
                for vid, spans in self.timelines[cid].intervals.items()}


def open_versions(events: Iterable[IndexedEvent]) -> set[tuple[UUID, int]]:
    """``(cell, vid)`` of every version open after the given events: the reference eligibility."""
    return {(cid, v.vid) for cid, t in fold(events).items() for v in t.state.versions if v.status in OPEN}


@dataclass(frozen=True, slots=True)
class SearchResult:
    """A cell found by search (docs/reading.md), read as of the searched event index.

    ``score`` is the best cosine among the cell's open versions (head and alternatives) and
    ``matched`` the value of that version.
    """

    cell: CellView
    score: float
    matched: str

    def to_dict(self) -> dict[str, Any]:
        return {**self.cell.to_dict(), "score": self.score, "matched": self.matched}
