"""The compact cell state: what ``decide`` needs about a cell, kept per cell beside the log.

A cell's full state holds every version it ever had, so reading it costs its history. The write path
keeps instead, per cell, one record (``pmem_cells``) with the cell's revision, its version count (the
next version id), its open versions (head and alternatives, with value, status, trust and supersedes
edge) and when it was last forgotten; its size follows the open versions, not the history. What
only readers need (evidence, sources, support counts, node types) stays in the log and the projections.

A rollback (``revoke`` of the head, ``reject`` without a value) reinstates the nearest ``superseded``
version along the head's supersedes edges, which may be one displaced long ago. Those versions are a
stack: the chain table (``pmem_chain``) holds one row per displaced-but-reinstatable version, its
value, trust and the next one below it. Versions on the way that can never be reinstated
(``contradicted``, ``revoked``) are skipped when the edges are written, so each rollback takes exactly
one row; a batch reads, per cell, as many rows as it has rollbacks, in one query per chunk.

Both are derived from the log, written in the transaction of the events, and rebuilt from it when a
store made before them is opened (:func:`states_from_log`). A forget deletes the cell's chain rows
and leaves only ``<forgotten>`` text in its record.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

import orjson
from eventsourcing.persistence import IntegrityError

from pmem.domain.state import SUPERSEDED, CellState, Version

StateRow = tuple[str, str, int, bytes]
"""A record of ``pmem_cells``: (cell id hex, namespace, revision, state)."""
ChainRow = tuple[str, int, str, int, int | None]
"""A row of ``pmem_chain``: (cell id hex, version id, value, trust, the next one below)."""
ROLLBACK_OPS = frozenset({"revoke", "reject"})  # the ops whose decision may walk the chain


class SparseVersions(list[Version]):
    """A cell's versions by id, holding only those the write path needs: ``len`` is the count of all
    (the next version's id), indexing finds a held one (one not held raises the library's
    ``IntegrityError``, a version conflict). The domain's transitions use it as the list."""

    __slots__ = ("held", "size")

    def __init__(self, held: dict[int, Version], count: int) -> None:
        super().__init__()
        self.held = held
        self.size = count

    def __len__(self) -> int:
        return self.size

    def __bool__(self) -> bool:
        return self.size > 0

    def __getitem__(self, vid: Any) -> Any:
        try:
            return self.held[vid]
        except KeyError:
            # The state and its chain rows are read in separate transactions outside a streamed batch:
            # a row missing here was taken by another writer in between, whose event the write would
            # conflict with anyway. As that conflict: the cell is read again and decided again.
            raise IntegrityError(f"version {vid} of the cell changed while it was read") from None

    def __iter__(self) -> Iterator[Version]:
        return iter(sorted(self.held.values(), key=lambda v: v.vid))

    def append(self, v: Version) -> None:
        self.held[v.vid] = v
        self.size += 1


class StateWrites(NamedTuple):
    """What a batch changes in the compact state, written in the transaction of its events."""

    states: list[StateRow]
    chain: list[ChainRow]
    unchained: list[tuple[str, int]]  # (cell id hex, version id): rows read and no longer reinstatable
    cleared: list[str]  # cells forgotten: every chain row goes


def _held(state: CellState) -> dict[int, Version]:
    versions = state.versions
    return versions.held if isinstance(versions, SparseVersions) else {v.vid: v for v in versions}


def _below(held: dict[int, Version], p: int | None) -> int | None:
    """The nearest version at or below ``p`` along supersedes edges that a rollback could reinstate."""
    while p is not None and (v := held.get(p)) is not None and v.status != SUPERSEDED:
        p = v.supersedes
    return p


def compact(hexid: str, state: CellState, revision: int, fetched: Iterable[int], out: StateWrites) -> CellState:
    """Add ``state``'s record and chain rows to ``out`` and return the compact state (the open versions
    only). ``fetched``: the versions read from the chain table for this batch."""
    held = _held(state)
    keep: dict[int, Version] = {}
    open_vids = [state.head_vid, *state.alternative_vids] if state.head_vid is not None else []
    for vid in open_vids:
        v = held[vid]
        keep[vid] = Version(vid, v.value, v.status, 0, v.trust, _below(held, v.supersedes))
    head = keep.get(state.head_vid) if state.head_vid is not None else None
    p = None if head is None else head.supersedes
    while p is not None and (old := held.get(p)) is not None:
        nxt = _below(held, old.supersedes)
        out.chain.append((hexid, old.vid, old.value, old.trust, nxt))
        p = nxt
    out.unchained.extend((hexid, vid) for vid in fetched if held[vid].status != SUPERSEDED)
    if state.forgotten_at == revision:
        out.cleared.append(hexid)
    small = CellState(state.namespace, state.key, SparseVersions(keep, len(state.versions)), state.head_vid,
                      list(state.alternative_vids), state.forgotten_at)
    out.states.append((hexid, state.namespace, revision, encode(small, revision)))
    return small


def encode(state: CellState, revision: int) -> bytes:
    versions = _held(state).values()
    return orjson.dumps([revision, len(state.versions), state.head_vid, state.alternative_vids, state.forgotten_at,
                         [[v.vid, v.value, v.status, v.trust, v.supersedes] for v in versions]])


def decode(namespace: str, key: str, blob: bytes) -> tuple[CellState, int]:
    """The compact state of a record, and the cell's revision."""
    revision, count, head_vid, alternatives, forgotten_at, versions = orjson.loads(blob)
    held = {vid: Version(vid, value, status, 0, trust, below) for vid, value, status, trust, below in versions}
    return CellState(namespace, key, SparseVersions(held, count), head_vid, alternatives, forgotten_at), revision


def chain_starts(state: CellState, rollbacks: int) -> tuple[int, int] | None:
    """``(version id, rows)``: where this cell's chain starts and how many rows a batch with
    ``rollbacks`` rollback ops on it may reinstate; None when it needs none."""
    head = state.head
    if rollbacks == 0 or head is None or head.supersedes is None:
        return None
    return head.supersedes, rollbacks


def add_chain(state: CellState, rows: Iterable[ChainRow]) -> list[int]:
    """Hold the chain rows read for ``state``'s cell; their version ids."""
    held = _held(state)
    vids = []
    for _, vid, value, trust, below in rows:
        held[vid] = Version(vid, value, SUPERSEDED, 0, trust, below)
        vids.append(vid)
    return vids


def states_from_log(events: Iterable[tuple[int, Any]]) -> StateWrites:
    """The compact state of every cell, folded from the log's ``(index, event)`` in index order (a
    store made before the compact state, opened for the first time)."""
    cells: dict[str, tuple[CellState, int]] = {}
    for _, event in events:
        hexid = event.originator_id.hex
        state = cells[hexid][0] if hexid in cells else CellState(event.namespace, event.key)
        event.apply_to(state)
        cells[hexid] = (state, event.originator_version)
    out = StateWrites([], [], [], [])
    for hexid, (state, revision) in cells.items():
        compact(hexid, state, revision, (), out)
    return out
