"""Decoding operations through the one schema (``pmem.domain.op_schema``): a JSON line
(``decode_line``) and a mapping (``parse_operation``) decode to the same operation, or are refused with
the same one-line message naming the field."""

from __future__ import annotations

import json
from datetime import datetime
from enum import Enum
from typing import Any, get_args
from uuid import UUID

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pmem.domain.errors import InvalidOperation
from pmem.domain.node_types import NODE_TYPES
from pmem.domain.op_decoding import decode_line
from pmem.domain.op_schema import OPS, STRUCTS, NodeType
from pmem.domain.operations import Decoded, Operation, check_operation, parse_operation
from tests.conftest import examples

FIELDS_OF = {op: set(STRUCTS[op].__struct_fields__) for op in OPS}

odd = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 200), st.integers(min_value=2**62, max_value=2**80),
    st.floats(allow_nan=False), st.text(max_size=6), st.lists(st.integers(), max_size=2),
    st.sampled_from(["", "   ", "\t", "\u00e9t\u00e9", "\u3000", "x" * 257, "y" * 300, "z" * 16385, "k",
                     "2026-05-01T10:00:00", "yesterday", "event", "persona", "update", "correction", 50, 100,
                     101, -1, 50.0, True]),
)
tricky = st.sampled_from(["", "   ", "\u00e9t\u00e9", "\u3000", "x" * 257, "2026-05-01T10:00:00", "soon", "event", 101,
                          None, True, 50.0])
strings = st.one_of(st.sampled_from(["k", "Room A", "v", "budget", "seen", "s", "m1"]), tricky, odd)
FIELDS = ("key", "namespace", "value", "new_value", "old_value", "status", "hard_commit", "text", "source",
          "trust", "op_id", "observed_at", "node_type", "bogus")
BASE = {"key": "k", "value": "v", "new_value": "w"}


def _mapping(op: Any, fields: dict[str, Any], drop: list[str]) -> dict[str, Any]:
    """A valid-looking operation ``op`` (key and value set), with some fields replaced and some dropped."""
    d = {"op": op, **{k: v for k, v in BASE.items() if (k == "new_value") == (op == "revise")}, **fields}
    return {k: v for k, v in d.items() if k not in drop}


mappings = st.one_of(
    st.builds(
        _mapping,
        st.one_of(st.sampled_from(OPS), st.sampled_from(["noop", "Accept"]), odd),
        st.dictionaries(st.sampled_from(FIELDS), strings, max_size=4),
        st.lists(st.sampled_from(["op", "key", "value", "new_value"]), max_size=1),
    ),
    # every field an op takes, each one present or not, each one valid or not
    st.sampled_from(OPS).flatmap(lambda op: st.fixed_dictionaries(
        {"op": st.just(op)}, optional={f: strings for f in sorted(FIELDS_OF[op])})),
)


def decoded(d: Any, namespace: str = "default") -> Any:
    """What ``parse_operation`` makes of ``d``: the operation, or its error (message and field)."""
    try:
        return parse_operation(d, namespace)
    except InvalidOperation as e:
        return ("error", str(e), e.field)


def decoded_line(line: bytes) -> Any:
    """What ``decode_line`` makes of ``line``: the operation, or its error (message and field)."""
    try:
        return decode_line(line, "default", 2)
    except InvalidOperation as e:
        return ("error", str(e), e.field)


@settings(max_examples=examples(1500), deadline=None)
@given(mappings)
def test_a_line_decodes_to_what_its_mapping_decodes_to(d: dict[str, Any]) -> None:
    try:
        line = json.dumps(d, allow_nan=False).encode()
    except ValueError:  # no JSON for an infinite float
        return
    assert decoded_line(line) == decoded(d)


@settings(max_examples=examples(1500), deadline=None)
@given(mappings)
def test_a_refused_operation_is_named_on_one_line(d: dict[str, Any]) -> None:
    got = decoded(d)
    if not isinstance(got, Operation):
        _, message, field = got
        assert "\n" not in message and message
        assert field is None or field in message or field == "key"


@pytest.mark.parametrize("line", [
    b'{"op":"accept","key":"Room A","value":"v","source":"s","trust":70,"op_id":"m1"}',
    b'{"op":"revise","key":"k","new_value":"w","old_value":"v","status":"correction","hard_commit":true}',
    b'{"op":"reject","key":"k","namespace":"other","observed_at":"2026-05-01T10:00:00","node_type":"event"}',
    b'{"op":"support","key":"k","text":"seen","trust":null,"namespace":null}',
    b'{"op":"accept","key":"Z\\u00fcrich","value":"\\u00e9t\\u00e9"}',
])
def test_a_decoded_operation_is_not_checked_again(line: bytes) -> None:
    op = decode_line(line, "default", 2)
    assert type(op) is Decoded and op == parse_operation(orjson.loads(line), "default")
    assert type(Operation(*op)) is Operation
    check_operation(Operation(*op))  # built by hand, the same operation passes the same schema


@pytest.mark.parametrize(("line", "message"), [
    (b'{"op":"accept","key":"k"}', "missing 'value'"),
    (b'{"op":"accept","key":"k","value":"v","trust":true}', "'trust' must be an integer from 0 to 100, got True"),
    (b'{"op":"accept","key":"k","value":"   "}', "'value' is empty (whitespace only)"),
    (b'{"op":"accept","key":"   ","value":"v"}', "key '   ' is empty after normalisation"),
    (b'{"op":"accept","key":"k","value":"v","observed_at":"soon"}', "'observed_at' is not ISO-8601: 'soon'"),
    (b'{"op":"accept","key":"k","value":"v","value2":"w"}', "unknown field 'value2' for accept"),
    (b'{"op":"revise","key":"k","value":"w"}', "unknown field 'value' for revise (revise takes new_value)"),
    (b'{"op":"revise","key":"k","new_value":"w","status":"maybe"}',
     "'status' must be one of correction, update, got 'maybe'"),
    (b'{"op":"accept","key":"k","value":"v","node_type":"place"}',
     "'node_type' must be one of event, persona, relationship, got 'place'"),
    (b'{"op":"noop","key":"k"}', "unknown op 'noop' (expected one of " + ", ".join(OPS) + ")"),
    (b"[1]", "an operation must be a JSON object, got list"),
    (b'{"op":"accept"', "malformed JSON: Input data was truncated"),
    (b'{"op":"accept","key":"k","value":"caf\xe9"}', "invalid UTF-8 at byte 37"),
])
def test_a_refused_line_says_why(line: bytes, message: str) -> None:
    assert decoded_line(line)[1] == message


def test_the_schema_admits_exactly_the_graph_node_types() -> None:
    assert set(get_args(NodeType)) == set(NODE_TYPES)


class _Str(str):
    """A str subclass: a mapping given to the Python API may hold one (orjson would encode it as a str)."""


class _Colour(Enum):
    RED = "red"


GRID = ["", "   ", "\t", "\u00e9t\u00e9", "\u3000", "q\udcff", "x" * 256, "x" * 257, "\u00e9" * 300, "k", "v",
        "2026-05-01T10:00:00", "soon", "event", "update", "correction", 0, 100, 101, -1, 50.0, True, False, None,
        [], {}, 2**70, ("v",), datetime(2026, 5, 1, 10, 0), UUID(int=1), _Str("k"), _Str("2026-05-01T10:00:00"),
        _Colour.RED]


@pytest.mark.parametrize("op", OPS)
def test_every_field_of_every_op_with_every_kind_of_value(op: str) -> None:
    """The grid: one field of a valid operation replaced by each awkward value; its JSON line decodes to
    what the mapping decodes to (the random tests above mix several)."""
    base = {"op": op, "key": "k", ("new_value" if op == "revise" else "value"): "v"}
    for field in sorted(FIELDS_OF[op]) + ["bogus"]:
        for raw in GRID:
            d = {**base, field: raw}
            got = decoded(d)
            try:
                line = json.dumps(d).encode()
            except (UnicodeEncodeError, TypeError):  # a lone surrogate, or no JSON value (a datetime...)
                continue
            plain = type(raw) in (str, int, bool, type(None), list, dict)
            if plain and b"\\udcff" not in line:  # a lone surrogate is no JSON: a line says so
                assert decoded_line(line) == got, d
