"""The typed decoding of operations (``pmem.domain.op_decoding``, msgspec structs) against the precise
parser (``parse_operation``): for any line or mapping, decoding either gives exactly the operation
``parse_operation`` gives, or hands the line to it (so the error message is always the precise one)."""

from __future__ import annotations

import json
from datetime import datetime
from enum import Enum
from typing import Any
from uuid import UUID

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pmem.domain.errors import InvalidOperation
from pmem.domain.op_decoding import convert, decode_line
from pmem.domain.operations import _ALLOWED, OPS, parse_operation

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
        {"op": st.just(op)}, optional={f: strings for f in sorted(_ALLOWED[op]) if f != "op"})),
)


def precise(d: Any, namespace: str = "default") -> Any:
    """What ``parse_operation`` makes of ``d``: the operation, or its error (message and field)."""
    try:
        return parse_operation(d, namespace)
    except InvalidOperation as e:
        return ("error", str(e), e.field)


@settings(max_examples=1500, deadline=None)
@given(mappings)
def test_a_decoded_line_is_what_parse_operation_makes_of_it(d: dict[str, Any]) -> None:
    op = decode_line(json.dumps(d).encode(), "default", 2)
    if op is not None:  # decoding vouched for the line: it must be valid, and the same operation
        assert precise(d) == op


@settings(max_examples=1500, deadline=None)
@given(mappings)
def test_converting_a_mapping_gives_the_result_or_the_error_of_parse_operation(d: dict[str, Any]) -> None:
    try:
        got: Any = convert(d, "default", 2)
    except InvalidOperation as e:
        got = ("error", str(e), e.field)
    assert got == precise(d)


@pytest.mark.parametrize("line", [
    b'{"op":"accept","key":"Room A","value":"v","source":"s","trust":70,"op_id":"m1"}',
    b'{"op":"revise","key":"k","new_value":"w","old_value":"v","status":"correction","hard_commit":true}',
    b'{"op":"reject","key":"k","namespace":"other","observed_at":"2026-05-01T10:00:00","node_type":"event"}',
    b'{"op":"support","key":"k","text":"seen","trust":null,"namespace":null}',
])
def test_common_lines_are_decoded_by_type(line: bytes) -> None:
    op = decode_line(line, "default", 2)
    assert op is not None
    assert op == parse_operation(orjson.loads(line), "default")


@pytest.mark.parametrize("line", [
    b'{"op":"accept","key":"k"}',  # value missing
    b'{"op":"accept","key":"k","value":"v","trust":true}',  # a bool is not a trust
    b'{"op":"accept","key":"k","value":"   "}',  # whitespace only
    b'{"op":"accept","key":"   ","value":"v"}',  # empty after normalisation
    b'{"op":"accept","key":"k","value":"v","observed_at":"soon"}',
    b'{"op":"accept","key":"k","value":"v","value2":"w"}',
    b'{"op":"accept","key":"k","value":"\\u00e9"}',  # not ASCII: the byte size is checked the precise way
    b'{"op":"accept","op":"reject","key":"k"}',
    b"[1]",
    b"",
])
def test_lines_decoding_cannot_vouch_for_go_the_precise_way(line: bytes) -> None:
    assert decode_line(line, "default", 2) is None


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
    """The grid: one field of a valid operation replaced by each awkward value; the typed decoding and
    the precise parser agree on every one (the random tests above mix several)."""
    base = {"op": op, "key": "k", ("new_value" if op == "revise" else "value"): "v"}
    for field in sorted(_ALLOWED[op] - {"op"}) + ["bogus"]:
        for raw in GRID:
            d = {**base, field: raw}
            try:
                got: Any = convert(d, "default", 2)
            except InvalidOperation as e:
                got = ("error", str(e), e.field)
            assert got == precise(d), d
            try:
                line = json.dumps(d).encode()
            except (UnicodeEncodeError, TypeError):  # a lone surrogate, or no JSON value (a datetime...)
                continue
            op_ = decode_line(line, "default", 2)
            assert op_ is None or op_ == precise(d), d
