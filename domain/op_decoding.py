"""Operation lines decoded by type, in C: each JSON line straight into its struct of the schema
(:mod:`pmem.domain.op_schema`), then into an operation by :func:`~pmem.domain.operations.from_struct`.

A line the structs refuse is read as plain JSON only to say which field is wrong and why
(:func:`~pmem.domain.operations.refusal`), never to decode it another way.
"""

from __future__ import annotations

import msgspec

from pmem.domain.errors import InvalidOperation
from pmem.domain.op_schema import OpStruct
from pmem.domain.operations import Decoded, from_struct, refusal

_DECODER = msgspec.json.Decoder(OpStruct)


def decode_line(line: bytes, namespace: str, key_edition: int) -> Decoded:
    """The operation of one JSON line, or :class:`InvalidOperation` saying why it is not one. (Blank
    lines are the caller's to skip.)"""
    try:
        s = _DECODER.decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        message, field = _refused(line, e)
        raise InvalidOperation(message, field=field) from None
    return from_struct(s, namespace, key_edition)


def _refused(line: bytes, error: Exception) -> tuple[str, str | None]:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as e:
        return f"invalid UTF-8 at byte {e.start}", None
    try:
        obj = msgspec.json.decode(line)
    except msgspec.DecodeError as e:
        return f"malformed JSON: {e}", None
    return refusal(obj, error)
