"""The reference read model: fold events, in event-index order, into cells with open intervals.

This is the definition every other projection is compared against (docs/concepts.md): the state as of
event index N is the fold of exactly the events with index <= N.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol
from uuid import UUID

from pmem.domain.state import OPEN, CellState
from pmem.domain.views import CellView, History, VersionView

if TYPE_CHECKING:  # domain.cell imports eventsourcing: reading the tables does not need it
    from pmem.domain.cell import CellEvent

IndexedEvent = tuple[int, "CellEvent"]  # (event index, event)


class EventSource(Protocol):
    """The port a reader needs from the log."""

    def cell_events(self, ids: Sequence[UUID], upto: int | None = None) -> dict[UUID, list[IndexedEvent]]: ...

    def indexed_events(self, start: int = 1, stop: int | None = None) -> Iterator[IndexedEvent]: ...


@dataclass(slots=True)
class Timeline:
    """A cell's state plus, per version, the event indices at which it opened and closed."""

    state: CellState
    intervals: dict[int, list[list[int | None]]] = field(default_factory=dict)
    indices: list[int] = field(default_factory=list)  # event index of each cell revision (1-based)

    def apply(self, index: int, event: CellEvent) -> None:
        self.indices.append(index)
        for vid in event.apply_to(self.state):
            is_open = self.state.versions[vid].status in OPEN
            spans = self.intervals.setdefault(vid, [])
            was_open = bool(spans) and spans[-1][1] is None
            if is_open and not was_open:
                spans.append([index, None])
            elif was_open and not is_open:
                spans[-1][1] = index

    def versions(self) -> tuple[VersionView, ...]:
        out = []
        for v in self.state.versions:
            spans = self.intervals[v.vid]  # every version opens when it is created
            out.append(VersionView(
                vid=v.vid, value=v.value, status=v.status, supersedes=v.supersedes,
                alternative_of=v.alternative_of,
                intervals=tuple((int(o or 0), c) for o, c in spans),
                trust=v.trust, support=v.support, sources=tuple(v.sources),
                evidence=tuple(self.indices[r - 1] for r in v.evidence),
            ))
        return tuple(out)

    def view(self, disclose: frozenset[str] = frozenset()) -> CellView:
        s = self.state
        head = s.head
        return CellView(
            namespace=s.namespace, key=s.key,
            value=None if head is None else head.value, status=s.status,
            alternatives=tuple(sorted(a.value for a in s.alternatives())),
            versions=self.versions() if disclose else (), disclose=disclose,
        )

    def history(self) -> History:
        return History(self.state.namespace, self.state.key, self.versions())


def fold(events: Iterable[IndexedEvent]) -> dict[UUID, Timeline]:
    """Fold indexed events (in index order) into one timeline per cell."""
    cells: dict[UUID, Timeline] = {}
    for index, event in events:
        t = cells.get(event.originator_id)
        if t is None:
            t = cells[event.originator_id] = Timeline(CellState(event.namespace, event.key))
        t.apply(index, event)
    return cells


def empty_view(namespace: str, key: str) -> CellView:
    return CellView(namespace=namespace, key=key, value=None, status="empty")


class ReplayReader:
    """Answers every read by folding the log (the reference; projections replace it for speed)."""

    def __init__(self, source: EventSource) -> None:
        self.source = source

    def timeline(self, cid: UUID, as_of: int | None = None) -> Timeline | None:
        events = self.source.cell_events([cid], upto=as_of).get(cid)
        return None if not events else fold(events)[cid]

    def frontier(self, namespace: str, as_of: int | None = None, *,
                 with_versions: bool = True) -> list[Timeline]:
        """Every cell of ``namespace`` with a head; ``with_versions`` is accepted for parity with
        the projection reader (a fold always has the versions)."""
        cells = fold(self.source.indexed_events(1, as_of))
        out = [t for t in cells.values() if t.state.namespace == namespace and t.state.head is not None]
        out.sort(key=lambda t: t.state.key)
        return out

    def frontier_page(self, namespace: str, as_of: int | None = None, *, after: str = "", limit: int,
                      with_versions: bool = True) -> tuple[list[Timeline], str | None]:
        """:meth:`frontier` after the key ``after``, ``limit`` cells at most, and the last key given (None:
        no cell is left): the projection reader's page, from a fold of the whole log."""
        cells = [t for t in self.frontier(namespace, as_of) if t.state.key > after]
        return cells[:limit], cells[limit - 1].state.key if len(cells) > limit else None
