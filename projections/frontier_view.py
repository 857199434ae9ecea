"""Reading the frontier projection: a cell as of event index N, assembled from interval rows.

Pure: the adapter queries the rows valid at N (``from_index <= N < to_index`` and the like),
:func:`open_intervals` derives each version's open intervals from its status rows, and
:func:`assemble` turns them into a :class:`ProjectedCell`, which answers ``view`` and ``history``
exactly as :class:`projections.replay.Timeline` does for the fold of the first N events.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pmem.domain.state import ACTIVE, ALTERNATIVE, CONTESTED, OPEN
from pmem.domain.views import CellView, History, VersionView

FOREVER = 2**62  # ``as_of`` for "now": later than any event index


@dataclass(frozen=True, slots=True)
class VersionRows:
    """One version's rows valid at N: its static columns, status, intervals and evidence."""

    vid: int
    value: str
    supersedes: int | None
    alternative_of: int | None
    status: str
    intervals: list[tuple[int, int | None]]  # (opened_at, closed_at), closed_at > N read as None
    evidence: list[tuple[int, str | None, int]]  # (event_index, source, trust) in index order


@dataclass(frozen=True, slots=True)
class ProjectedCell:
    """A cell read from the projection; the read-side counterpart of ``Timeline``."""

    namespace: str
    key: str
    value: str | None
    status: str
    alternatives: tuple[str, ...]
    versions: tuple[VersionView, ...]

    def view(self, disclose: frozenset[str] = frozenset()) -> CellView:
        return CellView(namespace=self.namespace, key=self.key, value=self.value, status=self.status,
                        alternatives=self.alternatives, versions=self.versions if disclose else (),
                        disclose=disclose)

    def history(self) -> History:
        return History(self.namespace, self.key, self.versions)


def version_view(r: VersionRows) -> VersionView:
    """Derive trust, support and sources from the evidence valid at N (as the fold would)."""
    sources: list[str] = []
    for _, source, _ in r.evidence:
        if source is not None and source not in sources:
            sources.append(source)
    return VersionView(
        vid=r.vid, value=r.value, status=r.status, supersedes=r.supersedes, alternative_of=r.alternative_of,
        intervals=tuple(r.intervals), trust=max(t for _, _, t in r.evidence),
        support=len(r.evidence) - 1, sources=tuple(sources), evidence=tuple(i for i, _, _ in r.evidence),
    )


def assemble(namespace: str, key: str, rows: Iterable[VersionRows]) -> ProjectedCell:
    versions = tuple(version_view(r) for r in sorted(rows, key=lambda r: r.vid))
    return summarize(namespace, key, [(v.value, v.status) for v in versions], versions)


def summarize(namespace: str, key: str, open_versions: Iterable[tuple[str, str]],
              versions: tuple[VersionView, ...] = ()) -> ProjectedCell:
    """The cell from its ``(value, status)`` pairs: the head and its sorted open alternatives."""
    head: tuple[str, str] | None = None
    alternatives: list[str] = []
    for value, status in open_versions:
        if status in (ACTIVE, CONTESTED):
            head = (value, status)
        elif status == ALTERNATIVE:
            alternatives.append(value)
    return ProjectedCell(namespace, key, None if head is None else head[0],
                         "empty" if head is None else head[1], tuple(sorted(alternatives)), versions)


def clip(opened_at: int, closed_at: int | None, as_of: int) -> tuple[int, int | None]:
    """An interval as the fold of the first ``as_of`` events saw it: not yet closed if it closed later."""
    return opened_at, closed_at if closed_at is not None and closed_at <= as_of else None


def open_intervals(statuses: Iterable[tuple[str, int, int | None]], as_of: int) -> list[tuple[int, int | None]]:
    """A version's open intervals as of ``as_of`` from its status rows ``(status, from_index,
    to_index)`` that began by then, in ``from_index`` order: the maximal runs of OPEN statuses, each
    clipped like the ``intervals`` view's rows are (see :data:`projections.frontier.VIEWS`)."""
    spans: list[tuple[int, int | None]] = []
    opened: int | None = None
    closed: int | None = None
    for status, start, end in statuses:
        if status in OPEN:
            if opened is None:
                opened = start
            closed = end
        elif opened is not None:
            spans.append(clip(opened, closed, as_of))
            opened = None
    if opened is not None:
        spans.append(clip(opened, closed, as_of))
    return spans
