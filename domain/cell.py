"""The cell aggregate and its events: one immutable event class per typed operation (docs/concepts.md).

Every event carries its evidence and everything replay needs. Topics and class versions are those of
:mod:`pmem.domain.event_schema` (stable names; an old event is upcast). The first event of a cell,
whatever its kind, creates the aggregate, so every recorded operation is exactly one event and one
event index.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar
from uuid import UUID

from eventsourcing.domain import AggregateEvent, BaseAggregate, OriginatorVersionError
from eventsourcing.utils import register_topic

from pmem.domain.event_schema import CLASS_VERSION, upcast_v1_v2
from pmem.domain.keys import cell_id
from pmem.domain.state import CONTRADICTED, REVOKED, SUPERSEDED, CellState


class CellEvent(AggregateEvent):
    """Base of every cell event. Fields shared by all: the cell, the evidence and why."""

    OP: ClassVar[str] = ""
    TOPIC: ClassVar[str] = ""
    class_version: ClassVar[int] = CLASS_VERSION  # see pmem.domain.event_schema

    namespace: str
    key: str
    requested: str  # the op the agent sent (may differ from OP after lowering or revise)
    reason: str | None
    text: str | None
    source: str | None
    trust: int
    observed_at: str | None
    op_id: str | None
    node_type: str | None  # graph node type supplied with the evidence (domain.node_types), if any

    upcast_v1_v2 = staticmethod(upcast_v1_v2)  # what eventsourcing's own mapper calls

    @property
    def value_or_none(self) -> str | None:
        return getattr(self, "value", None)

    @property
    def applied(self) -> bool:
        return True

    def mutate(self, aggregate: MemoryCell | None) -> MemoryCell:  # type: ignore[override]
        if aggregate is None:
            aggregate = MemoryCell.shell(self.originator_id, self.namespace, self.key, self.timestamp)
        elif self.originator_version != aggregate.version + 1:
            raise OriginatorVersionError(self.originator_version, aggregate.version + 1)
        type(self).transition(aggregate.state, self.__dict__, self.originator_version)
        aggregate.version = self.originator_version
        aggregate.modified_on = self.timestamp
        return aggregate

    def apply_to(self, state: CellState) -> list[int]:
        """Apply to the pure state; return the ids of versions whose status changed."""
        return type(self).transition(state, self.__dict__, self.originator_version)

    @classmethod
    def transition(cls, state: CellState, f: Mapping[str, Any], revision: int) -> list[int]:
        """Apply an event given as its field mapping (the stored form) at cell revision ``revision``.

        The write path applies decisions in this form, before (or without) building event objects.
        """
        raise NotImplementedError


class Accepted(CellEvent):
    OP = "accept"
    TOPIC = "pmem.cell/Accepted"
    value: str
    vid: int
    supersedes: int | None

    @classmethod
    def transition(cls, state: CellState, f: Mapping[str, Any], revision: int) -> list[int]:
        changed = state.commit_head(f["value"], revision, f["trust"], f["source"], SUPERSEDED)
        state.note_node_type(f["vid"], f.get("node_type"))
        return changed


class Contested(CellEvent):
    OP = "contest"
    TOPIC = "pmem.cell/Contested"
    value: str
    vid: int
    alternative_of: int

    @classmethod
    def transition(cls, state: CellState, f: Mapping[str, Any], revision: int) -> list[int]:
        changed = state.add_alternative(f["value"], revision, f["trust"], f["source"])
        state.note_node_type(f["vid"], f.get("node_type"))
        return changed


class Rejected(CellEvent):
    """``reject v`` (value set: v replaces the head) or ``reject`` (no value: roll the head back)."""

    OP = "reject"
    TOPIC = "pmem.cell/Rejected"
    value: str | None
    vid: int | None
    target: int  # the head that is recorded as wrong
    rejected: str  # its value

    @classmethod
    def transition(cls, state: CellState, f: Mapping[str, Any], revision: int) -> list[int]:
        if f["value"] is None:
            return state.rollback(CONTRADICTED)
        changed = state.commit_head(f["value"], revision, f["trust"], f["source"], CONTRADICTED)
        state.note_node_type(f["vid"], f.get("node_type"))
        return changed


class Revoked(CellEvent):
    """A retraction; the event is the tombstone and ``target`` is its ``revokes`` edge."""

    OP = "revoke"
    TOPIC = "pmem.cell/Revoked"
    value: str  # the retracted value
    target: int
    of_head: bool

    @classmethod
    def transition(cls, state: CellState, f: Mapping[str, Any], revision: int) -> list[int]:
        if f["of_head"]:
            return state.rollback(REVOKED)
        return state.revoke_alternative(f["target"])


class Resolved(CellEvent):
    OP = "resolve"
    TOPIC = "pmem.cell/Resolved"
    value: str  # the winning value
    target: int

    @classmethod
    def transition(cls, state: CellState, f: Mapping[str, Any], revision: int) -> list[int]:
        changed = state.resolve(f["target"])
        state.note_node_type(f["target"], f.get("node_type"))
        return changed


class Supported(CellEvent):
    OP = "support"
    TOPIC = "pmem.cell/Supported"
    value: str  # the supported value
    target: int

    @classmethod
    def transition(cls, state: CellState, f: Mapping[str, Any], revision: int) -> list[int]:
        changed = state.add_support(f["target"], revision, f["trust"], f["source"])
        state.note_node_type(f["target"], f.get("node_type"))
        return changed


class NotApplied(CellEvent):
    """The recorded ``noop``: the observation is kept with its reason; the cell does not change."""

    OP = "noop"
    TOPIC = "pmem.cell/NotApplied"
    value: str | None

    @property
    def applied(self) -> bool:
        return False

    @classmethod
    def transition(cls, state: CellState, f: Mapping[str, Any], revision: int) -> list[int]:
        return []


class Forgotten(CellEvent):
    """``forget``: the cell's data key was destroyed with this event (crypto-shredding,
    docs/forgetting.md). Every value, evidence text, source and reason recorded before it reads
    ``<forgotten>``; the cell is empty, and its next write starts a new life under a new key."""

    OP = "forget"
    TOPIC = "pmem.cell/Forgotten"
    value: None

    @classmethod
    def transition(cls, state: CellState, f: Mapping[str, Any], revision: int) -> list[int]:
        return state.forget(revision)


EVENT_CLASSES: tuple[type[CellEvent], ...] = (
    Accepted, Contested, Rejected, Revoked, Resolved, Supported, NotApplied, Forgotten,
)
for _cls in EVENT_CLASSES:
    register_topic(_cls.TOPIC, _cls)


class MemoryCell(BaseAggregate[UUID]):
    """One fact slot ``(namespace, key)``; its id is ``uuid5`` of both."""

    TOPIC = "pmem.cell/MemoryCell"
    state: CellState

    @staticmethod
    def create_id(namespace: str, key: str) -> UUID:
        return cell_id(namespace, key)

    @classmethod
    def shell(cls, id: UUID, namespace: str, key: str, timestamp: datetime) -> MemoryCell:  # noqa: A002
        """A cell before its first event (version 0). Events, not this, make it real."""
        agg = cls.__new__(cls)
        agg.__base_init__(id, 0, timestamp)
        agg.state = CellState(namespace, key)
        return agg

    @classmethod
    def new(cls, namespace: str, key: str, timestamp: datetime) -> MemoryCell:
        return cls.shell(cell_id(namespace, key), namespace, key, timestamp)

    def record(self, event_class: type[CellEvent], timestamp: datetime, fields: dict[str, Any]) -> CellEvent:
        """Construct the next event, apply it and queue it for saving.

        ``fields`` come from :func:`domain.decide.decide`, which always supplies every field of
        ``event_class``; the event is built the way the library's mapper rebuilds a stored one
        (the frozen dataclass ``__init__`` costs more than everything else on this path).
        """
        fields["originator_id"] = self.id
        fields["originator_version"] = self.version + 1
        fields["timestamp"] = timestamp
        event = object.__new__(event_class)
        object.__setattr__(event, "__dict__", fields)
        event.mutate(self)
        self.pending_events.append(event)
        return event


register_topic(MemoryCell.TOPIC, MemoryCell)
