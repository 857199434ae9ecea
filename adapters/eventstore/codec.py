"""The one event codec: how a cell event's fields become the stored ``state`` bytes and back.

The bytes are exactly what ``eventsourcing``'s ``JSONTranscoder`` would write for P-Mem events (plain
JSON, the timestamp as ``{"_type_": "datetime_iso", "_data_": ...}``, ``class_version`` when above
1), so either side can read the other's rows. Everything that writes or reads stored events goes
through here: the write path (:mod:`.eventlog`), the library's mapper (:mod:`.mapper`), the raw log
reader (:mod:`.stored_log`) and the parallel rebuild (:mod:`pmem.adapters.readmodels.parallel_rebuild`).
Sealed fields (:mod:`.sealing`) are opened here, with the keyring the caller passes: every read of a
stored event sees plaintext while its cell's key exists and ``<forgotten>`` once it is gone; a
plaintext event (written before sealing) reads as it was stored.
Topics, the current class version and upcasting are :mod:`pmem.domain.event_schema`'s. Only
:func:`event_class` and :func:`decode_event` load the event classes (and ``eventsourcing``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import orjson

from pmem.adapters.eventstore.sealing import FORGOTTEN_TOPIC, SEALED, Plain
from pmem.domain.event_schema import CLASS_VERSION, OP_BY_TOPIC, upcast

__all__ = ["CLASS_VERSION", "OP_BY_TOPIC", "decode_event", "decode_fields", "encode_state",
           "event_class", "event_classes", "event_from_fields", "recorded_at", "timestamp_envelope"]

_DT = "datetime_iso"


def timestamp_envelope(ts: datetime) -> dict[str, str]:
    """The stored form of an event's timestamp (a batch shares one)."""
    return {"_type_": _DT, "_data_": ts.isoformat()}


def recorded_at(fields: dict[str, Any]) -> datetime:
    """The timestamp of stored ``fields`` (as :func:`decode_fields` leaves them)."""
    return datetime.fromisoformat(fields["timestamp"]["_data_"])


def encode_state(fields: dict[str, Any], class_version: int) -> bytes:
    """The stored bytes of an event's fields (its timestamp already in its stored form, see
    :func:`timestamp_envelope`); ``fields`` gains ``class_version`` when it is above 1."""
    if class_version > 1:
        fields["class_version"] = class_version
    return orjson.dumps(fields)


def decode_fields(topic: str, state: bytes, cell: str = "", revision: int = 0, keys: Any = None) -> dict[str, Any]:
    """The fields of a stored event of ``cell`` (id hex) at ``revision``, upcast to the current class
    version and unsealed with ``keys`` (a :class:`.sealing.Keyring`; None: sealed fields read
    ``<forgotten>``); the timestamp stays in its stored form (a rebuild never reads it)."""
    try:
        d: dict[str, Any] = orjson.loads(state)
    except orjson.JSONDecodeError as e:
        raise _undecodable(topic, e) from e
    if not isinstance(d, dict):
        raise _undecodable(topic, "not a JSON object")
    opened(topic, d, cell, revision, keys)
    version = d.pop("class_version", 1)
    return d if version == CLASS_VERSION else upcast(d, version)


def opened(topic: str, d: dict[str, Any], cell: str, revision: int, keys: Any) -> dict[str, Any]:
    """``d`` (decoded JSON) with its sealed fields opened in place; a ``Forgotten`` event drops the
    cell's key from this process's cache."""
    if SEALED in d:
        (keys or _PLAIN).unseal(d, cell, revision)
    elif topic == FORGOTTEN_TOPIC and keys is not None:
        keys.drop([cell])
    return d


def event_classes() -> dict[str, Any]:
    """Topic -> event class (this loads :mod:`pmem.domain.cell`, and with it ``eventsourcing``)."""
    from pmem.domain.cell import EVENT_CLASSES

    return {cls.TOPIC: cls for cls in EVENT_CLASSES}


def event_class(topic: str) -> Any:
    """The class of ``topic``; an unknown topic raises the library's own ``TopicError``."""
    cls = event_classes().get(topic)
    if cls is None:
        from eventsourcing.utils import resolve_topic

        return resolve_topic(topic)
    return cls


def decode_event(topic: str, state: bytes, originator_id: UUID | str, originator_version: int,
                 keys: Any = None) -> Any:
    """The event object of a stored row, built the way the library's mapper rebuilds one (no
    dataclass ``__init__``: it costs more than everything else on this path); sealed fields are
    opened with ``keys`` (see :func:`decode_fields`)."""
    cid = originator_id if isinstance(originator_id, UUID) else UUID(originator_id)
    fields = decode_fields(topic, state, cid.hex, originator_version, keys)
    return event_from_fields(event_class(topic), fields, cid, originator_version)


def event_from_fields(cls: Any, d: dict[str, Any], originator_id: UUID | str, originator_version: int) -> Any:
    """The event of class ``cls`` whose decoded (and opened) fields are ``d`` (see :func:`decode_fields`)."""
    try:
        d["timestamp"] = recorded_at(d)
    except (KeyError, TypeError, ValueError) as e:
        raise _undecodable(cls.TOPIC, e) from e
    d["originator_id"] = originator_id if isinstance(originator_id, UUID) else UUID(originator_id)
    d["originator_version"] = originator_version
    event = object.__new__(cls)
    object.__setattr__(event, "__dict__", d)
    return event


_PLAIN = Plain()


def _undecodable(topic: str, why: object) -> Exception:
    """The library's ``MapperDeserialisationError``, as its own mapper would raise (imported only here,
    so reading a healthy log never loads ``eventsourcing``)."""
    from eventsourcing.persistence import MapperDeserialisationError

    return MapperDeserialisationError(f"cannot decode stored event with topic {topic!r}: {why}")
