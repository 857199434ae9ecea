"""The operation schema: one ``msgspec`` struct per typed operation (docs/decisions.md, "One operation
schema").

The structs say every rule a type can say: which fields an op takes, which are required, each field's
type and default, the range of ``trust``, the values of ``status`` and ``node_type``, and each string's
length in characters. ``msgspec`` checks them while it decodes a JSON line (``pmem apply``, ``POST
/v1/ops``) or converts a mapping (the Python API), and :func:`operations_schema` gives them as a JSON
schema to the MCP tools and the OpenAPI description. What a JSON schema cannot say (a string's size in
bytes of UTF-8, no lone surrogate, not only whitespace, the key after normalisation, an ISO-8601 time) is
checked once, on the decoded struct, by :mod:`pmem.domain.op_decoding`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

OPS = ("accept", "contest", "reject", "revoke", "resolve", "support", "revise")
MAX_VALUE_BYTES = 64 * 1024
MAX_TEXT_BYTES = 1024 * 1024
MAX_FIELD_CHARS = 1024
DEFAULT_TRUST = 50

# A string of more characters than its limit in bytes is certainly over it; the size in bytes of UTF-8 of
# a shorter one is checked after decoding.
Short = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_FIELD_CHARS)]
Value = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_VALUE_BYTES, description="the value")]
Text = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_TEXT_BYTES,
                                   description="the observation itself, as said")]
Trust = Annotated[int, msgspec.Meta(ge=0, le=100, description="0-100 (default 50); a server caps it at the "
                                                              "credential's maximum")]
NodeType = Literal["event", "persona", "relationship"]


class Op(msgspec.Struct, tag_field="op", forbid_unknown_fields=True, frozen=True, kw_only=True):
    """The fields every operation takes: the cell, and the evidence."""

    key: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_FIELD_CHARS, description=(
        "the fact's key, e.g. 'home city' or 'account.iban' (normalised: case and spaces do not matter)"))]
    namespace: Short | None = None
    text: Text | None = None
    source: Short | None = None
    trust: Trust | None = None
    observed_at: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_FIELD_CHARS,
                                             description="ISO-8601 time of the observation")] | None = None
    op_id: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_FIELD_CHARS, description=(
        "idempotency key: resending it records nothing new"))] | None = None
    node_type: NodeType | None = None


class Accept(Op, tag="accept", frozen=True, kw_only=True):
    """A new current value (the old one is kept as superseded)."""

    value: Value


class Contest(Op, tag="contest", frozen=True, kw_only=True):
    """Hold a value open as an alternative to the current one."""

    value: Value


class Resolve(Op, tag="resolve", frozen=True, kw_only=True):
    """Settle a contested cell on value."""

    value: Value


class Reject(Op, tag="reject", frozen=True, kw_only=True):
    """The current value is wrong: replace it with value, or without one roll back."""

    value: Value | None = None


class Revoke(Op, tag="revoke", frozen=True, kw_only=True):
    """Retract the current value (or the alternative given as value)."""

    value: Value | None = None


class Support(Op, tag="support", frozen=True, kw_only=True):
    """More evidence for the current value (or for the open version given as value)."""

    value: Value | None = None


class Revise(Op, tag="revise", frozen=True, kw_only=True):
    """A patch P-Mem classifies against the current value (docs/concepts.md)."""

    new_value: Value
    old_value: Value | None = None
    status: Literal["update", "correction"] = "update"
    hard_commit: bool = False


class Noop(Op, tag="noop", frozen=True, kw_only=True):
    """Internal: an observation that could not become a fact, recorded with the reason (agents never send it)."""

    reason: Text | None = None


OpStruct = Accept | Contest | Resolve | Reject | Revoke | Support | Revise
STRUCTS: dict[str, type[Op]] = {str(c.__struct_config__.tag): c for c in (Accept, Contest, Resolve, Reject, Revoke,
                                                                          Support, Revise, Noop)}


def operations_schema() -> dict[str, Any]:
    """The JSON schema of a list of operations, generated from the structs, with its references
    inlined (so it can sit inside another schema: an MCP tool's arguments, an OpenAPI body)."""
    schema = msgspec.json.schema(list[OpStruct])
    defs = schema.pop("$defs")
    schema["items"].pop("discriminator", None)  # its mapping names the references, which are inlined
    inlined: dict[str, Any] = _inlined(schema, defs)
    return inlined


def _inlined(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            return _inlined(defs[ref.rsplit("/", 1)[1]], defs)
        return {k: _inlined(v, defs) for k, v in node.items()}
    if isinstance(node, list):
        return [_inlined(v, defs) for v in node]
    return node
