"""Typed operations (the commands agents send) and their validation (docs/concepts.md).

``parse_operation`` turns one JSON object into an :class:`Operation` or raises
:class:`~domain.errors.InvalidOperation` naming the field that is wrong. Validation is complete
before anything is written, so a batch with one bad line writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, NamedTuple

from pmem.domain.errors import InvalidOperation
from pmem.domain.keys import normalize_key
from pmem.domain.node_types import node_type_problem

OPS = ("accept", "contest", "reject", "revoke", "resolve", "support", "revise")
VALUE_REQUIRED = frozenset({"accept", "contest", "resolve"})
MAX_VALUE_BYTES = 64 * 1024
MAX_TEXT_BYTES = 1024 * 1024
MAX_FIELD_CHARS = 1024
DEFAULT_TRUST = 50
DEFAULT_NAMESPACE = "default"

_EVIDENCE_FIELDS = frozenset({"source", "trust", "text", "op_id", "observed_at", "node_type"})
_COMMON_FIELDS = frozenset({"op", "key", "namespace"}) | _EVIDENCE_FIELDS
_ALLOWED = {
    op: _COMMON_FIELDS | ({"new_value", "old_value", "status", "hard_commit"} if op == "revise" else {"value"})
    for op in OPS
}


class Evidence(NamedTuple):
    """What travels with every observation (docs/concepts.md)."""

    text: str | None = None
    source: str | None = None
    trust: int = DEFAULT_TRUST
    observed_at: str | None = None
    op_id: str | None = None
    node_type: str | None = None  # graph node type (event, persona, relationship); None: the rule decides


class Operation(NamedTuple):
    """One typed operation on one cell. For ``revise``, ``value`` holds ``new_value``.

    (Named tuples, not frozen dataclasses: a batch builds hundreds of thousands of these.)
    """

    op: str
    namespace: str
    key: str
    value: str | None = None
    evidence: Evidence = Evidence()
    old_value: str | None = None
    correction: bool = False
    hard_commit: bool = False
    reason: str | None = None  # only for the internal ``noop`` op (see ``recorded_noop``)


NOOP = "noop"
"""Internal op: record an observation that could not become a fact (e.g. unusable model output).

``parse_operation`` does not admit it (agents send typed ops); extraction builds it with
:func:`recorded_noop` so a failure is an event in the log, never a silent drop."""


def recorded_noop(namespace: str, key: str, reason: str, evidence: Evidence) -> Operation:
    """An operation the domain records as a ``noop`` event carrying ``reason`` and ``evidence``."""
    return Operation(NOOP, namespace, key, evidence=evidence, reason=reason)


def _string(d: Mapping[str, Any], name: str, limit: int, *, required: bool = False) -> str | None:
    raw = d.get(name)
    if type(raw) is str and 0 < len(raw) <= limit // 4 and raw.isascii():
        return raw  # the common case, checked cheaply
    if raw is None:
        if required:
            raise InvalidOperation(f"missing {name!r}", field=name)
        return None
    if not isinstance(raw, str):
        raise InvalidOperation(f"{name!r} must be a string, got {type(raw).__name__}", field=name)
    if raw == "":
        raise InvalidOperation(f"{name!r} is empty", field=name)
    if len(raw) > limit // 4 and len(raw.encode("utf-8", "surrogatepass")) > limit:
        raise InvalidOperation(f"{name!r} is over {limit // 1024} KiB", field=name)
    if not raw.isascii() and any("\ud800" <= ch <= "\udfff" for ch in raw):
        raise InvalidOperation(f"{name!r} is not valid UTF-8 (lone surrogate)", field=name)
    return raw


def _trust(d: Mapping[str, Any]) -> int:
    raw = d.get("trust", DEFAULT_TRUST)
    if type(raw) is int and 0 <= raw <= 100:
        return raw
    if raw is None:
        return DEFAULT_TRUST
    if isinstance(raw, bool) or not isinstance(raw, int) or not 0 <= raw <= 100:
        raise InvalidOperation(f"'trust' must be an integer from 0 to 100, got {raw!r}", field="trust")
    return raw


def _observed_at(d: Mapping[str, Any]) -> str | None:
    raw = _string(d, "observed_at", MAX_FIELD_CHARS)
    if raw is not None:
        try:
            datetime.fromisoformat(raw)
        except ValueError:
            raise InvalidOperation(f"'observed_at' is not ISO-8601: {raw!r}", field="observed_at") from None
    return raw


def _node_type(d: Mapping[str, Any]) -> str | None:
    raw = d.get("node_type")
    if raw is None:
        return None
    problem = node_type_problem(raw)
    if problem is not None:
        raise InvalidOperation(problem, field="node_type")
    assert isinstance(raw, str)
    return raw


def parse_operation(d: Any, namespace: str = DEFAULT_NAMESPACE) -> Operation:
    """Validate one operation object (a JSON line of ``pmem apply``) into an :class:`Operation`."""
    if not isinstance(d, Mapping):
        raise InvalidOperation(f"an operation must be a JSON object, got {type(d).__name__}")
    op = d.get("op")
    if op not in _ALLOWED:
        shown = "missing" if op is None else repr(op)
        raise InvalidOperation(f"unknown op {shown} (expected one of {', '.join(OPS)})", field="op")
    if not d.keys() <= _ALLOWED[op]:
        unknown = sorted(set(d) - _ALLOWED[op])
        hint = " (revise takes new_value)" if op == "revise" and "value" in unknown else ""
        raise InvalidOperation(f"unknown field {unknown[0]!r} for {op}{hint}", field=unknown[0])
    raw_key = _string(d, "key", MAX_FIELD_CHARS, required=True)
    assert raw_key is not None
    key = normalize_key(raw_key)
    if not key:
        raise InvalidOperation(f"key {raw_key!r} is empty after normalisation", field="key")
    ns = (_string(d, "namespace", MAX_FIELD_CHARS) if "namespace" in d else None) or namespace
    evidence = Evidence(
        _string(d, "text", MAX_TEXT_BYTES) if "text" in d else None,
        _string(d, "source", MAX_FIELD_CHARS) if "source" in d else None,
        _trust(d) if "trust" in d else DEFAULT_TRUST,
        _observed_at(d) if "observed_at" in d else None,
        _string(d, "op_id", MAX_FIELD_CHARS) if "op_id" in d else None,
        _node_type(d) if "node_type" in d else None,
    )
    if op == "revise":
        status = d.get("status", "update")
        if status not in ("update", "correction"):
            raise InvalidOperation(f"'status' must be 'update' or 'correction', got {status!r}", field="status")
        hard = d.get("hard_commit", False)
        if not isinstance(hard, bool):
            raise InvalidOperation(f"'hard_commit' must be true or false, got {hard!r}", field="hard_commit")
        return Operation(
            op, ns, key,
            value=_string(d, "new_value", MAX_VALUE_BYTES, required=True),
            evidence=evidence,
            old_value=_string(d, "old_value", MAX_VALUE_BYTES),
            correction=status == "correction",
            hard_commit=hard,
        )
    value = _string(d, "value", MAX_VALUE_BYTES, required=op in VALUE_REQUIRED)
    return Operation(op, ns, key, value=value, evidence=evidence)
