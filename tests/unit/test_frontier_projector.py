"""The pure frontier projector (no I/O): rows from events, and resuming from stored rows."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pmem.domain.cell import CellEvent, MemoryCell
from pmem.domain.decide import decide
from pmem.domain.operations import DEFAULT_TRUST, parse_operation
from pmem.projections.frontier import TABLES, Changes, FrontierProjector
from pmem.projections.frontier_view import FOREVER, VersionRows, assemble, open_intervals
from pmem.projections.replay import fold

NOW = datetime(2026, 11, 29, tzinfo=UTC)
Tables = dict[str, dict[Any, tuple[Any, ...]]]


def events(*ops: dict[str, Any]) -> list[tuple[int, CellEvent]]:
    cells: dict[str, MemoryCell] = {}
    out = []
    for index, d in enumerate(ops, 1):
        op = parse_operation(d, "default")
        cell = cells.setdefault(op.key, MemoryCell.new("default", op.key, NOW))
        out.append((index, _record(cell, op)))
    return out


def _record(cell: MemoryCell, op: Any) -> CellEvent:
    event_class, fields = decide(cell.state, op)
    return cell.record(event_class, NOW, fields)


def store(tables: Tables, changes: Changes) -> None:
    for table, rows in changes.rows.items():
        tables.setdefault(table, {}).update(rows)


STORY = [
    {"op": "accept", "key": "budget", "value": "$30k", "source": "email"},
    {"op": "accept", "key": "budget", "value": "$50k"},
    {"op": "contest", "key": "budget", "value": "$45k", "source": "cfo"},
    {"op": "revoke", "key": "budget", "value": "$45k"},
    {"op": "revoke", "key": "budget"},  # $50k revoked, $30k reopens
    {"op": "support", "key": "budget", "source": "slack"},
    {"op": "accept", "key": "budget", "value": "$40k"},
    {"op": "contest", "key": "room", "value": "A"},  # a noop: no incumbent
]


def version_status(tables: Tables) -> list[tuple[Any, ...]]:
    """The rows of the ``version_status`` view: the closed runs, then each version's current status."""
    return [*tables.get("status_history", {}).values(),
            *((v[0], v[1], v[3], v[12], None) for v in tables["versions"].values())]


def evidence(tables: Tables) -> list[tuple[Any, ...]]:
    """The rows of the ``evidence`` view: each version's creating evidence, then the evidence added later."""
    return [*((v[0], v[1], v[9], v[10], v[11]) for v in tables["versions"].values()),
            *tables.get("evidence_events", {}).values()]


def statuses(tables: Tables, vid: int, n: int = FOREVER) -> list[tuple[str, int, int | None]]:
    """Version ``vid``'s status rows that began by ``n``, as ``(status, from_index, to_index)``."""
    return sorted(((s[2], s[3], s[4]) for s in version_status(tables) if s[1] == vid and s[3] <= n),
                  key=lambda s: s[1])


def test_a_reopened_version_gets_a_second_interval_and_status_rows_for_each_change() -> None:
    p = FrontierProjector()
    for index, e in events(*STORY):
        p.apply(index, e)
    rows = p.flush().rows
    cid = next(iter(rows["versions"]))[0]
    assert statuses(rows, 0) == [("active", 1, 2), ("superseded", 2, 5), ("active", 5, 7), ("superseded", 7, None)]
    assert open_intervals(statuses(rows, 0), FOREVER) == [(1, 2), (5, 7)]
    assert open_intervals(statuses(rows, 0), 6) == [(1, 2), (5, None)]  # closed after 6: open as of 6
    assert sorted((r[1], r[2], r[3]) for r in rows["edge_events"].values()) == [
        ("revokes", 4, 2), ("revokes", 5, 1), ("supported-by", 0, 6)]
    assert sorted((r[1], r[4], r[5], r[9]) for r in rows["versions"].values() if r[2] != "A") == [
        (0, None, None, 1), (1, 0, None, 2), (2, None, 1, 3), (3, 0, None, 7)]  # supersedes, alternative_of
    assert rows["versions"][cid, 0][7] == 1 and rows["versions"][cid, 0][8] == '["email", "slack"]'
    # stored apart from the versions rows: only closed status runs and evidence added after creation
    assert sorted(r[1:] for r in rows["status_history"].values() if r[1] == 0) == [
        (0, "active", 1, 2), (0, "active", 5, 7), (0, "superseded", 2, 5)]
    assert [r[1:4] for r in rows["evidence_events"].values()] == [(0, 6, "slack")]
    assert rows["versions"][cid, 0][9:] == (1, "email", DEFAULT_TRUST, 7)  # created by event 1; since 7
    assert {r[2] for r in rows["cells"].values()} == {"budget", "room"}


def test_a_projector_seeded_from_stored_rows_continues_exactly_like_one_that_never_stopped() -> None:
    evs = events(*STORY)
    for cut in range(len(evs) + 1):
        whole, first = FrontierProjector(), FrontierProjector()
        tables_whole: Tables = {}
        tables_resumed: Tables = {}
        for index, e in evs:
            whole.apply(index, e)
        store(tables_whole, whole.flush())
        for index, e in evs[:cut]:
            first.apply(index, e)
        store(tables_resumed, first.flush())
        resumed = FrontierProjector()
        for cid in resumed.missing(evs[cut:]):
            cell = tables_resumed.get("cells", {}).get(cid)
            if cell is not None:
                mine = {t: [r for r in tables_resumed.get(t, {}).values() if r[0] == cid] for t in TABLES}
                resumed.seed(cell, mine["versions"])
        for index, e in evs[cut:]:
            resumed.apply(index, e)
        store(tables_resumed, resumed.flush())
        assert tables_resumed == tables_whole, f"cut at {cut}"


def test_rows_read_as_of_n_assemble_into_what_the_fold_of_n_events_shows() -> None:
    evs = events(*STORY[:7])
    p = FrontierProjector()
    tables: Tables = {}
    for index, e in evs:
        p.apply(index, e)
    store(tables, p.flush())
    for n in [*range(1, 8), FOREVER]:
        rows = [VersionRows(
            vid, value, sup, alt,
            next(s[2] for s in version_status(tables) if s[1] == vid and s[3] <= n and (s[4] is None or s[4] > n)),
            open_intervals(statuses(tables, vid, n), n),
            sorted(ev[2:] for ev in evidence(tables) if ev[1] == vid and ev[2] <= n))
            for _, vid, value, _, sup, alt, _, _, _, created, *_ in tables["versions"].values() if created <= n]
        got = assemble("default", "budget", rows)
        (timeline,) = fold(evs[:n]).values()
        assert got.history() == timeline.history(), n
        assert got.view(frozenset({"history"})) == timeline.view(frozenset({"history"})), n
