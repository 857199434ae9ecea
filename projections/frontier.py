"""The frontier-and-history projection: row changes computed from events, in event-index order.

Pure: :class:`FrontierProjector` consumes ``(event_index, event)`` and produces the rows an adapter
writes into its tables (schema in :data:`TABLES`). It keeps the state of the cells it has seen in
memory, applies each event through the domain's own transitions (so no rule is re-derived here) and
turns the version ids they report as changed into status-history rows, from which the open
intervals of :class:`projections.replay.Timeline` follow (the ``intervals`` view of :data:`VIEWS`).
What every version has exactly one of is a column of its ``versions`` row, not a row of its own: its
current status and since when (``status_since``; ``status_history`` keeps the closed runs) and the
evidence of the event that created it (``created_source``, ``created_trust``; ``evidence_events``
keeps the evidence added later). The ``version_status`` and ``evidence`` views put them together.
The adapter seeds it with the stored state of a cell before the cell's first event in a batch (see
:meth:`FrontierProjector.missing` and :meth:`seed`).

Every row is keyed by its primary key, so writing the rows of a batch is an idempotent upsert and
a batch may change one row several times: the last change wins.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from pmem.domain.state import ACTIVE, ALTERNATIVE, CONTESTED, FORGOTTEN_TEXT, OPEN, CellState, Version

if TYPE_CHECKING:  # domain.cell imports eventsourcing: a reader that only reads tables does not need it
    from pmem.domain.cell import CellEvent

NAME = "frontier"
SCHEMA_VERSION = 4  # bump when the tables or their meaning change: stored projections are then rebuilt
# (2: the tables became WITHOUT ROWID; 3: ``intervals`` and the supersedes/alternative-of edges became
# views over version_status and versions, fewer rows written per event, and ``edge_events`` holds the rest;
# 4: ``version_status`` and ``evidence`` became views too: a version's current status and its creating
# evidence are columns of ``versions``, ``status_history`` and ``evidence_events`` hold the other rows)
Row = tuple[Any, ...]

# table -> (columns with SQLite types, primary key). Column order is the order of every row tuple.
TABLES: dict[str, tuple[dict[str, type], tuple[str, ...]]] = {
    "cells": ({"cell_id": str, "namespace": str, "key": str, "first_index": int, "last_index": int},
              ("cell_id",)),
    "versions": ({"cell_id": str, "vid": int, "value": str, "status": str, "supersedes": int,
                  "alternative_of": int, "trust": int, "support": int, "sources": str,
                  "created_index": int, "created_source": str, "created_trust": int, "status_since": int},
                 ("cell_id", "vid")),
    "status_history": ({"cell_id": str, "vid": int, "status": str, "from_index": int, "to_index": int},
                       ("cell_id", "vid", "from_index")),  # only the closed runs of a status
    "evidence_events": ({"cell_id": str, "vid": int, "event_index": int, "source": str, "trust": int},
                        ("cell_id", "vid", "event_index")),  # only evidence added after the creating event
    "edge_events": ({"cell_id": str, "kind": str, "src": int, "dst": int, "event_index": int},
                    ("cell_id", "kind", "src", "dst")),  # only supported-by and revokes edges
}
_PK: dict[str, Callable[[Row], Any]] = {
    t: itemgetter(*(list(cols).index(c) for c in pk)) for t, (cols, pk) in TABLES.items()}
NULLABLE = {"versions": {"supersedes", "alternative_of", "created_source"}, "evidence_events": {"source"}}

OPEN_SQL = ", ".join(f"'{s}'" for s in sorted(OPEN))  # the open statuses, an SQL list (views, listings)
# Views over the tables, in the SQL common to SQLite (3.25+: window functions) and PostgreSQL, with the
# columns of the tables they replaced, in dependency order (a view after the views it reads; dropped in
# reverse). ``version_status``: the closed runs, then each version's current status (``to_index`` NULL,
# typed as the column is). ``evidence``: each version's creating evidence, then the evidence added later.
# ``intervals``: the maximal runs of OPEN statuses of a version (gaps and islands: a run is numbered by
# the count of non-open rows before it); a run's rows are contiguous (each row's to_index is the next
# one's from_index), so it closes at its last row's to_index, NULL while that row is current. ``edges``:
# supersedes and alternative-of are columns of the new version, created with it; supported-by and
# revokes come from their own events.
VIEWS: dict[str, str] = {
    "version_status": (
        "SELECT cell_id, vid, status, from_index, to_index FROM status_history "
        "UNION ALL SELECT cell_id, vid, status, status_since, CAST(NULL AS BIGINT) FROM versions"),
    "evidence": (
        "SELECT cell_id, vid, created_index AS event_index, created_source AS source, created_trust AS trust "
        "FROM versions UNION ALL SELECT cell_id, vid, event_index, source, trust FROM evidence_events"),
    "intervals": (
        "SELECT cell_id, vid, MIN(from_index) AS opened_at, "
        "CASE WHEN COUNT(to_index) = COUNT(*) THEN MAX(to_index) END AS closed_at "
        "FROM (SELECT cell_id, vid, status, from_index, to_index, "
        f"SUM(CASE WHEN status IN ({OPEN_SQL}) THEN 0 ELSE 1 END) OVER "
        "(PARTITION BY cell_id, vid ORDER BY from_index ROWS UNBOUNDED PRECEDING) AS run "
        "FROM version_status) AS s "
        f"WHERE status IN ({OPEN_SQL}) GROUP BY cell_id, vid, run"),
    "edges": (
        "SELECT cell_id, 'supersedes' AS kind, vid AS src, supersedes AS dst, created_index AS event_index "
        "FROM versions WHERE supersedes IS NOT NULL "
        "UNION ALL SELECT cell_id, 'alternative-of', vid, alternative_of, created_index "
        "FROM versions WHERE alternative_of IS NOT NULL "
        "UNION ALL SELECT cell_id, kind, src, dst, event_index FROM edge_events"),
}


@dataclass(slots=True)
class Changes:
    """Rows to upsert, per table, keyed by primary key."""

    rows: dict[str, dict[Any, Row]] = field(default_factory=lambda: {t: {} for t in TABLES})

    def put(self, table: str, row: Row) -> None:
        self.rows[table][_PK[table](row)] = row

    def __len__(self) -> int:
        return sum(len(r) for r in self.rows.values())


@dataclass(slots=True)
class Tracked:
    """What the projector knows of one cell: its state, and per version what its row stores beyond it."""

    cell_id: str
    state: CellState
    first_index: int = 0
    last_index: int = 0
    created: dict[int, tuple[int, str | None, int]] = field(default_factory=dict)  # vid -> (index, source, trust)
    status_since: dict[int, tuple[str, int]] = field(default_factory=dict)  # vid -> (status, from_index)


class FrontierProjector:
    """Turns events into row changes for the frontier-and-history tables (see module docstring)."""

    def __init__(self, max_cached_cells: int = 100_000) -> None:
        self.cells: dict[str, Tracked] = {}
        self.max_cached_cells = max_cached_cells
        self.changes = Changes()

    # -- the cache -------------------------------------------------------------
    def missing(self, events: Iterable[tuple[int, CellEvent]]) -> list[str]:
        """Cell ids (hex) of these events whose state must be seeded from storage first."""
        return sorted({e.originator_id.hex for _, e in events} - self.cells.keys())

    def seed(self, cell: Sequence[Any], versions: Iterable[Row]) -> None:
        """Load a cell from its stored rows: its ``cells`` row and its ``versions`` rows (which carry
        each version's current status and since when)."""
        cid, namespace, key, first_index, last_index = cell
        state = CellState(namespace, key)
        t = Tracked(cid, state, first_index, last_index)
        for (_, vid, value, status, sup, alt, trust, support, sources, created, created_source, created_trust,
             since) in sorted(versions, key=_vid):
            state.versions.append(Version(vid, value, status, 0, trust, sup, alt, support, [],
                                          list(json.loads(sources))))
            t.created[vid] = (created, created_source, created_trust)
            t.status_since[vid] = (status, since)
            if status in (ACTIVE, CONTESTED):
                state.head_vid = vid
            elif status == ALTERNATIVE:
                state.alternative_vids.append(vid)
        self.cells[cid] = t

    def forget(self) -> None:
        """Drop every cached cell and pending change (after a failed or foreign-written batch)."""
        self.cells.clear()
        self.changes = Changes()

    def flush(self) -> Changes:
        """The changes since the last flush; the cache is trimmed when it has grown too big."""
        out, self.changes = self.changes, Changes()
        if len(self.cells) > self.max_cached_cells:
            self.cells.clear()
        return out

    # -- applying --------------------------------------------------------------
    def apply(self, index: int, event: CellEvent) -> None:
        """Apply one event (the next in index order). An uncached cell is taken to be new."""
        cid = event.originator_id.hex
        t = self.cells.get(cid)
        if t is None:
            t = self.cells[cid] = Tracked(cid, CellState(event.namespace, event.key), index)
        versions = t.state.versions
        before = len(versions)
        changed = event.apply_to(t.state)
        if event.OP == "forget":  # the creating evidence's source is forgotten too
            t.created = {vid: (i, None if src is None else FORGOTTEN_TEXT, trust)
                         for vid, (i, src, trust) in t.created.items()}
        t.last_index = index
        self.changes.put("cells", (cid, t.state.namespace, t.state.key, t.first_index, index))
        touched = set(changed)
        for vid in range(before, len(versions)):
            # its creating evidence (``_new_version`` always records it) and its supersedes/alternative-of
            # edges are columns of its row
            t.created[vid] = (index, event.source, event.trust)
            touched.add(vid)
        target = getattr(event, "target", None)
        if target is not None and target < before:
            v = versions[target]
            if v.evidence and v.evidence[-1] == event.originator_version:  # evidence added to it (support)
                self.changes.put("evidence_events", (cid, target, index, event.source, event.trust))
                touched.add(target)
        for vid in changed:
            self._status_changed(t, versions[vid].status, vid, index)
        for vid in touched:
            self._version_row(t, versions[vid])
        if event.OP == "support":
            self.changes.put("edge_events", (cid, "supported-by", target, index, index))
        elif event.OP == "revoke":
            self.changes.put("edge_events", (cid, "revokes", index, target, index))

    def _status_changed(self, t: Tracked, status: str, vid: int, index: int) -> None:
        """A run of one status closes (a ``status_history`` row) when the status differs; the new one is
        the version row's ``status_since``."""
        current = t.status_since.get(vid)
        if current is None or current[0] != status:
            if current is not None:
                self.changes.put("status_history", (t.cell_id, vid, current[0], current[1], index))
            t.status_since[vid] = (status, index)

    def _version_row(self, t: Tracked, v: Version) -> None:
        created, source, trust = t.created[v.vid]
        self.changes.put("versions", (t.cell_id, v.vid, v.value, v.status, v.supersedes, v.alternative_of,
                                      v.trust, v.support, json.dumps(v.sources), created, source, trust,
                                      t.status_since[v.vid][1]))


def _vid(row: Row) -> int:
    return int(row[1])
