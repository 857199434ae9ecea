"""Deciding: which event an operation becomes, given the cell's state (SPEC §3 and §5).

Pure: no clock, no I/O. The trust rule is enforced here, in the domain, so no caller can bypass it:
an observation whose trust is below the head's can never displace or retract the head.
"""

from __future__ import annotations

from typing import Any

from pmem.domain.cell import (
    Accepted,
    CellEvent,
    Contested,
    MemoryCell,
    NotApplied,
    Rejected,
    Resolved,
    Revoked,
    Supported,
)
from pmem.domain.operations import NOOP, Operation
from pmem.domain.state import CONTESTED, CellState

Decision = tuple[type[CellEvent], dict[str, Any]]


def with_(fields: dict[str, Any], **more: Any) -> dict[str, Any]:
    fields.update(more)
    return fields


def decide(state: CellState, op: Operation) -> Decision:
    """Return the event class and fields that ``op`` becomes on a cell in ``state``."""
    ev = op.evidence
    common: dict[str, Any] = {
        "namespace": state.namespace, "key": state.key, "requested": op.op, "reason": None,
        "text": ev.text, "source": ev.source, "trust": ev.trust,
        "observed_at": ev.observed_at, "op_id": ev.op_id, "node_type": ev.node_type,
    }

    def noop(reason: str) -> Decision:
        common["reason"] = reason
        common["value"] = op.value
        return NotApplied, common

    head = state.head
    kind, value = op.op, op.value
    if kind == NOOP:
        return noop(op.reason or "recorded noop")
    if kind == "revise":
        if op.old_value is not None and not op.hard_commit and (head is None or head.value != op.old_value):
            current = "the cell is empty" if head is None else f"head is {head.value!r}"
            return noop(f"stale old_value: {current}")
        if head is None:
            kind = "accept"
        elif value == head.value:
            kind = "support"
        else:
            kind = "reject" if op.correction else "accept"
        common["reason"] = f"revise classified as {kind}"

    low = head is not None and ev.trust < head.trust
    if head is not None and low and value is not None and (
            kind == "reject" or (kind == "accept" and value != head.value)):
        common["reason"] = f"lowered {kind} to contest: trust {ev.trust} is below the head's {head.trust}"
        kind = "contest"

    if kind == "accept":
        assert value is not None
        if head is None:
            return Accepted, with_(common, value=value, vid=len(state.versions), supersedes=None)
        if value == head.value:
            return Supported, with_(common, value=head.value, target=head.vid)
        return Accepted, with_(common, value=value, vid=len(state.versions), supersedes=head.vid)

    if kind == "contest":
        assert value is not None
        if head is None:
            return noop("contest needs an incumbent")
        same = state.find_open(value)
        if same is not None:
            return Supported, with_(common, value=same.value, target=same.vid)
        return Contested, with_(common, value=value, vid=len(state.versions), alternative_of=head.vid)

    if kind == "reject":
        if head is None:
            return noop("reject needs a head")
        if value is None:
            if low:
                return noop("insufficient trust")
            return Rejected, with_(common, value=None, vid=None, target=head.vid, rejected=head.value)
        if value == head.value:
            return noop("reject value equals head")
        return Rejected, with_(common, value=value, vid=len(state.versions), target=head.vid,
                               rejected=head.value)

    if kind == "revoke":
        if head is None:
            return noop("revoke needs a head")
        target = head if value is None else state.find_open(value)
        if target is None:
            return noop("revoke target not open")
        if target is head and low:
            return noop("insufficient trust")
        return Revoked, with_(common, value=target.value, target=target.vid, of_head=target is head)

    if kind == "resolve":
        if head is None or head.status != CONTESTED:
            return noop("resolve needs a contested cell")
        assert value is not None
        winner = state.find_open(value)
        if winner is None:
            return noop("resolve value is not a candidate")
        if winner is not head and low:
            return noop("insufficient trust")
        return Resolved, with_(common, value=winner.value, target=winner.vid)

    if kind == "support":
        target = head if value is None else state.find_open(value)
        if target is None:
            return noop("support target not open")
        return Supported, with_(common, value=target.value, target=target.vid)

    raise AssertionError(f"unhandled op {kind!r}")  # parse_operation admits only the ops above


def execute(cell: MemoryCell, op: Operation) -> Decision:
    """Decide ``op`` on ``cell`` and apply the decision; return the event class and its stored fields.

    The lean form of ``cell.record(*decide(cell.state, op))``: the same event, applied through the
    same transition, without building the event object (the write path encodes the fields directly).
    """
    event_class, fields = decide(cell.state, op)
    version = cell.version + 1
    event_class.transition(cell.state, fields, version)
    cell.version = version
    return event_class, fields
