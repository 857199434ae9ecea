"""The frontier tables of a whole log, folded cell by cell: the fast path of a full rebuild.

A full rebuild does not need the incremental projector's bookkeeping (a cache of cells, upserts that
replace a row several times per batch, a version row re-encoded at every event that touches it).
:func:`fold_cell` takes ONE cell's events in revision order and returns only the final rows of that
cell, each exactly the row :class:`projections.frontier.FrontierProjector` would leave in the tables
after the same events (the Hypothesis tests compare the two table by table). Cells are independent,
so a log read in cell order folds with one cell in memory at a time, and its rows come out in
primary-key order (every primary key starts with ``cell_id``).

Events arrive in their stored form, ``(event index, cell revision, event class, field mapping)``:
the transitions of :mod:`domain.cell` apply that form directly, so no event object is built.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pmem.domain.state import CellState
from pmem.projections.frontier import TABLES, Row


class Transition(Protocol):
    """What the fold needs of an event class (``domain.cell.CellEvent`` subclasses satisfy it)."""

    OP: str

    def transition(self, state: CellState, f: Mapping[str, Any], revision: int) -> list[int]: ...


StoredEvent = tuple[int, int, Transition, Mapping[str, Any]]  # (event index, revision, class, fields)


@dataclass(slots=True)
class CellRows:
    """Final rows per table (column order of :data:`projections.frontier.TABLES`)."""

    rows: dict[str, list[Row]] = field(default_factory=lambda: {t: [] for t in TABLES})
    events: int = 0

    def extend(self, other: CellRows) -> None:
        for table, rows in other.rows.items():
            self.rows[table].extend(rows)
        self.events += other.events


# ``json.dumps`` of a version's sources, by the tuple of them: a rebuild writes a row per version, and a
# log's versions name few distinct lists of sources (the text is the incremental projector's own)
_SOURCES_TEXT: dict[tuple[str, ...], str] = {}
_SOURCES_HELD = 4096


def _sources_text(sources: Sequence[str], texts: dict[tuple[str, ...], str]) -> str:
    key = tuple(sources)
    text = texts.get(key)
    if text is None:
        if len(texts) >= _SOURCES_HELD:
            texts.clear()
        text = texts[key] = json.dumps(sources)
    return text


def fold_cell(cid: str, events: Sequence[StoredEvent], out: CellRows) -> None:
    """Append to ``out`` the final rows of cell ``cid`` after ``events`` (all its events, in revision
    order from the one that created the cell). Mirrors ``FrontierProjector.apply`` step by step."""
    if not events:
        return
    first, base, _, f = events[0]
    state = CellState(f["namespace"], f["key"])
    versions = state.versions
    status_since: dict[int, tuple[str, int]] = {}  # vid -> (current status, from_index)
    closed = out.rows["status_history"]
    evidence = out.rows["evidence_events"]
    edges = out.rows["edge_events"]
    for index, revision, cls, f in events:
        before = len(versions)
        changed = cls.transition(state, f, revision)
        target = f.get("target")
        if target is not None and target < before:
            v = versions[target]
            if v.evidence and v.evidence[-1] == revision:
                evidence.append((cid, target, index, f["source"], f["trust"]))
        for vid in changed:
            status = versions[vid].status
            current = status_since.get(vid)
            if current is None or current[0] != status:
                if current is not None:
                    closed.append((cid, vid, current[0], current[1], index))
                status_since[vid] = (status, index)
        op = cls.OP
        if op == "support":
            edges.append((cid, "supported-by", target, index, index))
        elif op == "revoke":
            edges.append((cid, "revokes", index, target, index))
    out.events += len(events)
    out.rows["cells"].append((cid, state.namespace, state.key, first, events[-1][0]))
    rows = out.rows["versions"]
    texts = _SOURCES_TEXT
    for v in versions:  # a version's creating event (its first evidence) is its revision's, in order from base
        index, revision, _, f = events[v.created_at - base]
        if revision != v.created_at:
            raise ValueError(f"cell {cid}: its events are not every revision from {base} on, in order")
        rows.append((cid, v.vid, v.value, v.status, v.supersedes, v.alternative_of, v.trust, v.support,
                     _sources_text(v.sources, texts) if v.sources else "[]", index, f["source"], f["trust"],
                     status_since[v.vid][1]))
