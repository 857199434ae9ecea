"""The rules of SPEC §3 on the pure aggregate (in memory, no store)."""

from __future__ import annotations

from datetime import UTC, datetime

from pmem.domain.cell import MemoryCell
from pmem.domain.decide import decide
from pmem.domain.operations import parse_operation

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def run(*ops: tuple[str, str | None, int]) -> tuple[MemoryCell, list[object]]:
    cell = MemoryCell.new("default", "k", NOW)
    events = []
    for op, value, trust in ops:
        d = {"op": op, "key": "k", "trust": trust, **({} if value is None else {"value": value})}
        event_class, fields = decide(cell.state, parse_operation(d))
        events.append(cell.record(event_class, NOW, fields))
    return cell, events


def statuses(cell: MemoryCell) -> list[tuple[str, str]]:
    return [(v.value, v.status) for v in cell.state.versions]


def test_k_retractions_reinstate_the_value_from_before_the_k_latest_commits() -> None:
    cell, _ = run(("accept", "a", 50), ("accept", "b", 50), ("accept", "c", 50), ("reject", None, 50),
                  ("revoke", None, 50))
    assert statuses(cell) == [("a", "active"), ("b", "revoked"), ("c", "contradicted")]


def test_rollback_skips_contradicted_and_revoked_predecessors() -> None:
    cell, _ = run(("accept", "a", 50), ("reject", "b", 50), ("accept", "c", 50), ("revoke", None, 50))
    # c supersedes b (superseded), b supersedes a (contradicted): rollback reopens b
    assert statuses(cell) == [("a", "contradicted"), ("b", "active"), ("c", "revoked")]
    cell, _ = run(("accept", "a", 50), ("reject", "b", 50), ("revoke", None, 50))
    assert cell.state.head is None  # a was contradicted, so nothing reopens


def test_rolling_back_a_contested_head_promotes_the_newest_alternative() -> None:
    cell, _ = run(("accept", "a", 50), ("contest", "b", 50), ("contest", "c", 50), ("reject", None, 50))
    assert statuses(cell) == [("a", "contradicted"), ("b", "alternative"), ("c", "contested")]


def test_low_trust_cannot_displace_or_retract_the_head() -> None:
    cell, events = run(("accept", "a", 80), ("accept", "b", 30), ("reject", "c", 30), ("reject", None, 30),
                       ("revoke", None, 30), ("resolve", "b", 30))
    assert [e.OP for e in events] == ["accept", "contest", "contest", "noop", "noop", "noop"]
    assert [e.reason for e in events][3:] == ["insufficient trust"] * 3
    assert cell.state.head is not None and cell.state.head.value == "a"


def test_support_raises_a_versions_trust_to_its_best_evidence() -> None:
    cell, _ = run(("accept", "a", 30), ("support", None, 90), ("accept", "b", 50))
    assert statuses(cell) == [("a", "contested"), ("b", "alternative")]  # b (50) cannot displace a (90)


def test_every_event_records_its_evidence_and_the_requested_op() -> None:
    _, events = run(("accept", "a", 50), ("accept", "a", 70))
    e = events[1]
    assert (e.OP, e.requested, e.trust, e.target) == (
        "support", "accept", 70, 0)
