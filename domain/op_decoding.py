"""Operation lines decoded by type, in C: one ``msgspec`` struct per operation (docs/decisions.md,
"Typed decoding of operations").

The structs carry every rule that a type can say (which fields an op takes, which are required, each
field's type, the range of ``trust``, the values of ``status``, the length of a string in characters),
so ``msgspec`` checks them while it decodes. What a type cannot say (the size of a string in bytes of
UTF-8, no lone surrogate, not whitespace only, the key after normalisation, an ISO-8601 time, a node
type) is checked after, on the decoded struct, by the cheap tests of the common (ASCII) case.

Anything the structs refuse, and anything those after-checks cannot pass cheaply, goes to
:func:`pmem.domain.operations.parse_operation`, which gives the same answer for every valid operation and
the one precise message (which field, and why) for an invalid one. So decoding here only ever accepts
what ``parse_operation`` accepts, with the same result; a test holds the two equal.
"""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Annotated, Any, Literal

import msgspec

from pmem.domain.keys import normalize_key
from pmem.domain.node_types import NODE_TYPES
from pmem.domain.operations import (
    DEFAULT_TRUST,
    MAX_FIELD_CHARS,
    MAX_TEXT_BYTES,
    MAX_VALUE_BYTES,
    Evidence,
    Operation,
    parse_operation,
)

# A string of at most limit // 4 characters is certainly within limit bytes of UTF-8; a longer one may
# still be, and is then left to parse_operation.
_Short = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_FIELD_CHARS // 4)]
_Value = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_VALUE_BYTES // 4)]
_Text = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_TEXT_BYTES // 4)]
_Trust = Annotated[int, msgspec.Meta(ge=0, le=100)]


class _Op(msgspec.Struct, tag_field="op", forbid_unknown_fields=True, frozen=True, kw_only=True):
    """The fields every operation takes: the cell, and the evidence."""

    key: _Short
    namespace: _Short | None = None
    text: _Text | None = None
    source: _Short | None = None
    trust: _Trust | None = None
    observed_at: _Short | None = None
    op_id: _Short | None = None
    node_type: _Short | None = None


class Accept(_Op, tag="accept", frozen=True, kw_only=True):
    value: _Value


class Contest(_Op, tag="contest", frozen=True, kw_only=True):
    value: _Value


class Resolve(_Op, tag="resolve", frozen=True, kw_only=True):
    value: _Value


class Reject(_Op, tag="reject", frozen=True, kw_only=True):
    value: _Value | None = None


class Revoke(_Op, tag="revoke", frozen=True, kw_only=True):
    value: _Value | None = None


class Support(_Op, tag="support", frozen=True, kw_only=True):
    value: _Value | None = None


class Revise(_Op, tag="revise", frozen=True, kw_only=True):
    new_value: _Value
    old_value: _Value | None = None
    status: Literal["update", "correction"] = "update"
    hard_commit: bool = False


OpStruct = Accept | Contest | Resolve | Reject | Revoke | Support | Revise
_DECODER = msgspec.json.Decoder(OpStruct)
_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, UnicodeError)  # a lone surrogate: no UTF-8
_ENCODER = msgspec.json.Encoder()
_PLAIN = (str, int, bool, type(None))


def decode_line(line: bytes, namespace: str, key_edition: int) -> Operation | None:
    """The operation of one JSON line, or None when the typed decoding cannot vouch for it (then the
    caller parses the line with ``parse_operation``, for the result or the precise error)."""
    try:
        s = _DECODER.decode(line)
    except _ERRORS:
        return None
    return from_struct(s, namespace, key_edition)


def convert(obj: Any, namespace: str, key_edition: int) -> Operation:
    """The operation of a mapping (the Python API's form of a line), as ``parse_operation`` makes it.

    A plain dict of plain JSON values (``str``, ``int``, ``bool``, ``None``, exactly those types) is
    encoded to JSON and decoded as a line: ``msgspec.convert`` into the union of structs is several
    times slower than encoding it to JSON and decoding that by type. Anything else (a float, a datetime, a str
    subclass, a mapping of another type...) is converted as it is, so no value is made a string that
    was not one."""
    try:
        if type(obj) is dict and all(type(k) is str and type(v) in _PLAIN for k, v in obj.items()):
            s = _DECODER.decode(_ENCODER.encode(obj))
        else:
            s = msgspec.convert(obj, OpStruct)
    except _ERRORS:
        s = None
    op = None if s is None else from_struct(s, namespace, key_edition)
    return parse_operation(obj, namespace, key_edition) if op is None else op


def from_struct(s: OpStruct, namespace: str, key_edition: int) -> Operation | None:
    """The operation ``s`` decodes to, or None where the common-case checks cannot pass it. (ASCII
    strings are within their byte limits and free of surrogates; other strings go the precise way.)"""
    key = _key(s.key, key_edition)
    ns = namespace if s.namespace is None else s.namespace
    if not key or not ns.isascii() or ns.isspace() or not _evidence_ok(s):
        return None
    ev = Evidence(s.text, s.source, DEFAULT_TRUST if s.trust is None else s.trust, s.observed_at, s.op_id,
                  s.node_type)
    if type(s) is Revise:
        new, old = s.new_value, s.old_value
        if not new.isascii() or new.isspace() or old is not None and (not old.isascii() or old.isspace()):
            return None
        return Operation("revise", ns, key, new, ev, old, s.status == "correction", s.hard_commit)
    value = s.value  # type: ignore[union-attr]  # every op but revise has a value
    if value is not None and (not value.isascii() or value.isspace()):
        return None
    return Operation(_TAGS[type(s)], ns, key, value, ev)


_TAGS: dict[type, str] = {cls: str(cls.__struct_config__.tag) for cls in
                          (Accept, Contest, Resolve, Reject, Revoke, Support, Revise)}


def _evidence_ok(s: _Op) -> bool:
    text, source, op_id, observed_at, node_type = s.text, s.source, s.op_id, s.observed_at, s.node_type
    return ((text is None or text.isascii()) and (source is None or source.isascii())
            and (op_id is None or op_id.isascii()) and (observed_at is None or _iso(observed_at))
            and (node_type is None or node_type in NODE_TYPES))


def _iso(raw: str) -> bool:
    if not raw.isascii():
        return False
    try:
        datetime.fromisoformat(raw)
    except ValueError:
        return False
    return True


@lru_cache(maxsize=65536)
def _key(raw: str, edition: int) -> str:
    """The normalised key (a batch names the same keys again and again)."""
    return normalize_key(raw, edition) if raw.isascii() else ""
