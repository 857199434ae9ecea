"""Deciding: which event an operation becomes, given the cell's state (docs/concepts.md).

Pure: no clock, no I/O. The trust rule is enforced here, in the domain, so no caller can bypass it:
an observation never closes an open version (the head or an alternative) whose trust is higher than
its own. An ``accept`` or ``reject`` that would is held open as a ``contest`` instead; a ``revoke`` or
``resolve`` that would is not applied ("insufficient trust"). Equal trust may close.
"""

from __future__ import annotations

from collections.abc import Callable
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
from pmem.domain.state import CONTESTED, CellState, Version

Decision = tuple[type[CellEvent], dict[str, Any]]


def with_(fields: dict[str, Any], **more: Any) -> dict[str, Any]:
    fields.update(more)
    return fields


def _noop(common: dict[str, Any], value: str | None, reason: str) -> Decision:
    common["reason"] = reason
    common["value"] = value
    return NotApplied, common


def _stale_old_value(head: Version | None, op: Operation) -> str | None:
    """The reason a ``revise`` is stale (its ``old_value`` is not the head's), or None."""
    if op.old_value is not None and not op.hard_commit and (head is None or head.value != op.old_value):
        current = "the cell is empty" if head is None else f"head is {head.value!r}"
        return f"stale old_value: {current}"
    return None


def _revise_kind(head: Version | None, op: Operation) -> str:
    """The op a (fresh) ``revise`` is classified as."""
    if head is None:
        return "accept"
    if op.value == head.value:
        return "support"
    return "reject" if op.correction else "accept"


# Each per-op rule gets (state, head, value, common, low): ``low`` is whether the evidence's trust is
# below the head's. A rule returns the decision; ``common`` is the shared field dict it extends.
Rule = Callable[[CellState, Version | None, str | None, dict[str, Any], bool], Decision]


def _accept(state: CellState, head: Version | None, value: str | None, common: dict[str, Any],
            low: bool) -> Decision:
    assert value is not None
    if head is None:
        return Accepted, with_(common, value=value, vid=len(state.versions), supersedes=None)
    if value == head.value:
        return Supported, with_(common, value=head.value, target=head.vid)
    return Accepted, with_(common, value=value, vid=len(state.versions), supersedes=head.vid)


def _contest(state: CellState, head: Version | None, value: str | None, common: dict[str, Any],
             low: bool) -> Decision:
    assert value is not None
    if head is None:
        return _noop(common, value, "contest needs an incumbent")
    same = state.find_open(value)
    if same is not None:
        return Supported, with_(common, value=same.value, target=same.vid)
    return Contested, with_(common, value=value, vid=len(state.versions), alternative_of=head.vid)


def _reject(state: CellState, head: Version | None, value: str | None, common: dict[str, Any],
            low: bool) -> Decision:
    if head is None:
        return _noop(common, value, "reject needs a head")
    if value is None:
        if low:
            return _noop(common, value, "insufficient trust")
        return Rejected, with_(common, value=None, vid=None, target=head.vid, rejected=head.value)
    if value == head.value:
        return _noop(common, value, "reject value equals head")
    return Rejected, with_(common, value=value, vid=len(state.versions), target=head.vid,
                           rejected=head.value)


def _revoke(state: CellState, head: Version | None, value: str | None, common: dict[str, Any],
            low: bool) -> Decision:
    if head is None:
        return _noop(common, value, "revoke needs a head")
    target = head if value is None else state.find_open(value)
    if target is None:
        return _noop(common, value, "revoke target not open")
    if (target is head and low) or target.trust > common["trust"]:
        return _noop(common, value, "insufficient trust")
    return Revoked, with_(common, value=target.value, target=target.vid, of_head=target is head)


def _resolve(state: CellState, head: Version | None, value: str | None, common: dict[str, Any],
             low: bool) -> Decision:
    if head is None or head.status != CONTESTED:
        return _noop(common, value, "resolve needs a contested cell")
    assert value is not None
    winner = state.find_open(value)
    if winner is None:
        return _noop(common, value, "resolve value is not a candidate")
    if (winner is not head and low) or _stronger([head, *state.alternatives()], common["trust"], winner):
        return _noop(common, value, "insufficient trust")
    return Resolved, with_(common, value=winner.value, target=winner.vid)


def _support(state: CellState, head: Version | None, value: str | None, common: dict[str, Any],
             low: bool) -> Decision:
    target = head if value is None else state.find_open(value)
    if target is None:
        return _noop(common, value, "support target not open")
    return Supported, with_(common, value=target.value, target=target.vid)


def _stronger(versions: list[Version], trust: int, spared: Version | None = None) -> Version | None:
    """The first of ``versions`` (other than ``spared``) whose trust is above ``trust``: one an
    observation of that trust may not close."""
    return next((v for v in versions if v is not spared and v.trust > trust), None)


def _lowering(state: CellState, head: Version, trust: int) -> str | None:
    """Why an ``accept``/``reject`` of a new value, which would close the head and every open
    alternative, must be held open as a ``contest`` instead; None when it may close them all."""
    if trust < head.trust:
        return f"trust {trust} is below the head's {head.trust}"
    if not state.alternative_vids:
        return None
    stronger = _stronger(state.alternatives(), trust)
    if stronger is not None:
        return f"trust {trust} is below the open alternative {stronger.value!r}'s {stronger.trust}"
    return None


_RULES: dict[str, Rule] = {
    "accept": _accept, "contest": _contest, "reject": _reject,
    "revoke": _revoke, "resolve": _resolve, "support": _support,
}


def decide(state: CellState, op: Operation) -> Decision:
    """Return the event class and fields that ``op`` becomes on a cell in ``state``."""
    ev = op.evidence
    common: dict[str, Any] = {
        "namespace": state.namespace, "key": state.key, "requested": op.op, "reason": None,
        "text": ev.text, "source": ev.source, "trust": ev.trust,
        "observed_at": ev.observed_at, "op_id": ev.op_id, "node_type": ev.node_type,
    }
    head = state.head
    kind, value = op.op, op.value
    if kind == NOOP:
        return _noop(common, value, op.reason or "recorded noop")
    if kind == "revise":
        stale = _stale_old_value(head, op)
        if stale is not None:
            return _noop(common, value, stale)
        kind = _revise_kind(head, op)
        common["reason"] = f"revise classified as {kind}"

    low = head is not None and ev.trust < head.trust
    if head is not None and value is not None and kind in ("accept", "reject"):
        if value != head.value:
            why = _lowering(state, head, ev.trust)
        else:  # nothing would close; a reject of the head's own value is still lowered when it is weaker
            why = f"trust {ev.trust} is below the head's {head.trust}" if kind == "reject" and low else None
        if why is not None:
            common["reason"] = f"lowered {kind} to contest: {why}"
            kind = "contest"

    rule = _RULES.get(kind)
    if rule is None:
        raise AssertionError(f"unhandled op {kind!r}")  # parse_operation admits only the ops above
    return rule(state, head, value, common, low)


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
