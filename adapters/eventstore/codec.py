"""A fast event codec with the library's wire format.

``OrjsonMapper`` is an ``eventsourcing`` ``Mapper`` whose bytes are exactly what the library's
``JSONTranscoder`` would write for P-Mem events (plain JSON, the timestamp as
``{"_type_": "datetime_iso", "_data_": ...}``), so either side can read the other's rows. It skips
the per-event work the stock mapper does for types P-Mem events never carry, which is most of
the cost of writing (see NOTES.md).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import orjson
from eventsourcing.persistence import Mapper, MapperDeserialisationError, StoredEvent
from eventsourcing.utils import get_topic, resolve_topic

import pmem.domain.cell  # noqa: F401  (registers the event topics resolve_topic looks up)

_DT = "datetime_iso"


class OrjsonMapper(Mapper[UUID]):
    """Encode and decode P-Mem events with orjson (no compression, no cipher)."""

    _last_ts: tuple[datetime | None, dict[str, str]] = (None, {})

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        state = dict(vars(domain_event))
        originator_id = state.pop("originator_id")
        originator_version = state.pop("originator_version")
        ts: datetime = state["timestamp"]
        last, envelope = self._last_ts
        if ts is not last:  # a batch shares one timestamp object: format it once
            envelope = {"_type_": _DT, "_data_": ts.isoformat()}
            self._last_ts = (ts, envelope)
        state["timestamp"] = envelope
        class_version = getattr(type(domain_event), "class_version", 1)
        if class_version > 1:
            state["class_version"] = class_version
        return StoredEvent(
            originator_id=originator_id,
            originator_version=originator_version,
            topic=get_topic(type(domain_event)),
            state=orjson.dumps(state),
        )


def decode_state(topic: str, state: bytes) -> tuple[type[Any], dict[str, Any]]:
    """The event class and its field dict (timestamp decoded, upcast to the current class version)."""
    cls = resolve_topic(topic)
    try:
        d: dict[str, Any] = orjson.loads(state)
        ts = d["timestamp"]
        d["timestamp"] = datetime.fromisoformat(ts["_data_"])
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise MapperDeserialisationError(f"cannot decode stored event with topic {topic!r}: {e}") from e
    return cls, _upcast(cls, d)


def decode_fields(topic: str, state: bytes) -> tuple[type[Any], dict[str, Any]]:
    """Like :func:`decode_state`, but the timestamp stays in its stored form: a full rebuild of the
    frontier never reads it."""
    cls = resolve_topic(topic)
    try:
        d: dict[str, Any] = orjson.loads(state)
    except orjson.JSONDecodeError as e:
        raise MapperDeserialisationError(f"cannot decode stored event with topic {topic!r}: {e}") from e
    return cls, _upcast(cls, d)


def _upcast(cls: type[Any], d: dict[str, Any]) -> dict[str, Any]:
    current = getattr(cls, "class_version", 1)
    version = d.pop("class_version", 1)
    while version < current:
        getattr(cls, f"upcast_v{version}_v{version + 1}")(d)
        version += 1
    return d


def decode_event(topic: str, state: bytes, originator_id: UUID | str, originator_version: int) -> Any:
    cls, d = decode_state(topic, state)
    d["originator_id"] = originator_id if isinstance(originator_id, UUID) else UUID(originator_id)
    d["originator_version"] = originator_version
    event = object.__new__(cls)
    object.__setattr__(event, "__dict__", d)
    return event
