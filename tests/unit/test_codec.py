"""The one event codec: the bytes the library would write, upcasting, and agreement with the classes."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from uuid import uuid4

import orjson
import pytest
from eventsourcing.persistence import DatetimeAsISO, JSONTranscoder, Mapper, MapperDeserialisationError
from hypothesis import given
from hypothesis import strategies as st

from pmem.adapters.eventstore import codec
from pmem.domain import event_schema
from pmem.domain.cell import EVENT_CLASSES, Accepted

FIELDS = {"namespace": "default", "key": "city", "requested": "accept", "reason": None, "text": None,
          "source": "s", "trust": 50, "observed_at": None, "op_id": None, "node_type": None, "value": "Porto",
          "vid": 1}


def test_the_schema_names_every_event_class_with_its_op_and_the_current_version() -> None:
    assert event_schema.OP_BY_TOPIC == {c.TOPIC: c.OP for c in EVENT_CLASSES}
    assert {c.class_version for c in EVENT_CLASSES} == {event_schema.CLASS_VERSION}
    assert set(event_schema.UPCASTERS) == set(range(1, event_schema.CLASS_VERSION))
    assert codec.event_classes() == {c.TOPIC: c for c in EVENT_CLASSES}


def test_the_write_path_and_the_library_s_own_mapper_write_the_same_bytes() -> None:
    ts = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    event = object.__new__(Accepted)
    object.__setattr__(event, "__dict__", {**FIELDS, "originator_id": uuid4(), "originator_version": 1,
                                          "timestamp": ts})
    transcoder = JSONTranscoder()
    transcoder.register(DatetimeAsISO())
    by_mapper = Mapper(transcoder=transcoder).to_stored_event(event).state
    by_codec = codec.encode_state({**FIELDS, "timestamp": codec.timestamp_envelope(ts)}, Accepted.class_version)
    assert by_mapper == by_codec
    assert orjson.loads(by_codec)["class_version"] == 2


VALUES = st.text(max_size=5) | st.none() | st.integers(-(2**63), 2**63 - 1)


@given(st.dictionaries(st.sampled_from(sorted(FIELDS)), VALUES))
def test_decoding_gives_back_what_was_encoded(extra: dict[str, object]) -> None:
    fields = {**FIELDS, **extra, "timestamp": codec.timestamp_envelope(datetime.now(UTC))}
    stored = codec.encode_state(dict(fields), event_schema.CLASS_VERSION)
    assert codec.decode_fields("pmem.cell/Accepted", stored) == fields


def test_a_version_1_row_is_upcast_and_a_current_one_is_left_alone() -> None:
    old = {k: v for k, v in FIELDS.items() if k != "node_type"}
    old["timestamp"] = codec.timestamp_envelope(datetime.now(UTC))
    assert codec.decode_fields("pmem.cell/Accepted", orjson.dumps(old))["node_type"] is None
    event = codec.decode_event("pmem.cell/Accepted", orjson.dumps(old), uuid4(), 1)
    assert type(event) is Accepted and event.node_type is None and event.value == "Porto"


@pytest.mark.parametrize("state", [b"{not json", b"[1, 2]", b'{"key": "k"}'])
def test_a_damaged_row_is_the_librarys_deserialisation_error(state: bytes) -> None:
    with pytest.raises(MapperDeserialisationError, match="cannot decode stored event"):
        codec.decode_event("pmem.cell/Accepted", state, uuid4(), 1)


def test_the_codec_loads_no_event_library_until_an_event_object_is_asked_for() -> None:
    code = ("import sys; from pmem.adapters.eventstore import codec\n"
            "codec.decode_fields('pmem.cell/Accepted', b'{\"key\": \"k\"}')\n"
            "assert 'eventsourcing' not in sys.modules, 'eventsourcing was imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
