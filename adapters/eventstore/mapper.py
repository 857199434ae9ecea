"""``eventsourcing``'s ``Mapper`` for P-Mem events, on the one codec (:mod:`.codec`).

It skips the per-event work the stock mapper does for types P-Mem events never carry, which was most
of the cost of writing (docs/benchmarks.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.persistence import Mapper, StoredEvent
from eventsourcing.utils import get_topic

from pmem.adapters.eventstore.codec import encode_state, timestamp_envelope


class OrjsonMapper(Mapper[UUID]):
    """Encode P-Mem events with orjson (no compression, no cipher); decoding is the library's own, on
    the same bytes (the P-Mem read paths decode with :func:`.codec.decode_event` directly)."""

    _last_ts: tuple[datetime | None, dict[str, str]] = (None, {})

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        state = dict(vars(domain_event))
        originator_id = state.pop("originator_id")
        originator_version = state.pop("originator_version")
        ts: datetime = state["timestamp"]
        last, envelope = self._last_ts
        if ts is not last:  # a batch shares one timestamp object: format it once
            envelope = timestamp_envelope(ts)
            self._last_ts = (ts, envelope)
        state["timestamp"] = envelope
        return StoredEvent(
            originator_id=originator_id,
            originator_version=originator_version,
            topic=get_topic(type(domain_event)),
            state=encode_state(state, getattr(type(domain_event), "class_version", 1)),
        )

