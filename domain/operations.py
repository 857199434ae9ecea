"""Typed operations (the commands agents send) and their validation (docs/concepts.md).

``parse_operation`` turns one JSON object into an :class:`Operation` or raises
:class:`~domain.errors.InvalidOperation` naming the field that is wrong. Validation is complete
before anything is written, so a batch with one bad line writes nothing. :func:`check_operation`
holds an :class:`Operation` built directly to the same rules (the event log checks every operation
with it before deciding anything), so an invalid event cannot be appended.

The arguments of the public entry points are checked here too (docs/decisions.md, "Input
validation"): :func:`checked_namespace`, :func:`checked_string`, :func:`checked_count` and
:func:`optional_count`.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from datetime import datetime
from typing import Any, NamedTuple

from pmem.domain.errors import InvalidOperation
from pmem.domain.keys import KEY_EDITION, normalize_key
from pmem.domain.node_types import NODE_TYPES, node_type_problem

OPS = ("accept", "contest", "reject", "revoke", "resolve", "support", "revise")
VALUE_REQUIRED = frozenset({"accept", "contest", "resolve"})
MAX_VALUE_BYTES = 64 * 1024
MAX_TEXT_BYTES = 1024 * 1024
MAX_FIELD_CHARS = 1024
DEFAULT_TRUST = 50
DEFAULT_NAMESPACE = "default"
MAX_INDEX = 2**63 - 1
"""The largest event index, count or size an argument may give: a signed 64-bit integer, what SQLite and
PostgreSQL store."""

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


def shown(raw: object, limit: int = 60) -> str:
    """``raw`` for a one-line message: the repr of a plain value (cut to ``limit`` characters; a huge
    integer by its size), else the name of its type."""
    if isinstance(raw, int) and not isinstance(raw, bool) and raw.bit_length() > 1000:
        return f"an integer of {raw.bit_length()} bits"
    if raw is None or isinstance(raw, (str, bytes, int, float)):
        text = repr(raw)
        return text if len(text) <= limit else text[:limit - 3] + "..."
    return type(raw).__name__


def string_problem(raw: object, name: str, limit: int, *, blank: bool = True) -> str | None:
    """Why ``raw`` is not a valid string ``name`` of at most ``limit`` bytes of UTF-8, or None. Empty is
    never valid; whitespace only is valid only where ``blank``."""
    if not isinstance(raw, str):
        return f"{name!r} must be a string, got {type(raw).__name__}"
    if raw == "":
        return f"{name!r} is empty"
    if len(raw) > limit // 4 and len(raw.encode("utf-8", "surrogatepass")) > limit:
        return f"{name!r} is over {limit // 1024} KiB"
    if not raw.isascii() and any("\ud800" <= ch <= "\udfff" for ch in raw):
        return f"{name!r} is not valid UTF-8 (lone surrogate)"
    if not blank and raw.isspace():
        return f"{name!r} is empty (whitespace only)"
    return None


def _string(d: Mapping[str, Any], name: str, limit: int, *, required: bool = False, blank: bool = True) -> str | None:
    raw = d.get(name)
    if type(raw) is str and 0 < len(raw) <= limit // 4 and raw.isascii() and (blank or not raw.isspace()):
        return raw  # the common case, checked cheaply
    if raw is None:
        if required:
            raise InvalidOperation(f"missing {name!r}", field=name)
        return None
    problem = string_problem(raw, name, limit, blank=blank)
    if problem is not None:
        raise InvalidOperation(problem, field=name)
    assert isinstance(raw, str)
    return raw


def checked_string(raw: object, name: str, limit: int = MAX_FIELD_CHARS, *, blank: bool = False,
                   field: str | None = None) -> str:
    """``raw`` if it is a valid string argument ``name`` (see :func:`string_problem`), else
    :class:`InvalidOperation`."""
    if type(raw) is str and 0 < len(raw) <= limit // 4 and raw.isascii() and (blank or not raw.isspace()):
        return raw
    problem = string_problem(raw, name, limit, blank=blank)
    if problem is not None:
        raise InvalidOperation(problem, field=field or name)
    assert isinstance(raw, str)
    return raw


def checked_namespace(raw: object, name: str = "namespace") -> str:
    """``raw`` if it is a valid namespace: a string of 1 to 1,024 bytes of UTF-8, not only whitespace."""
    return checked_string(raw, name, MAX_FIELD_CHARS, field="namespace")


def optional_count(raw: object, name: str, what: str, *, minimum: int = 0, field: str | None = None) -> int | None:
    """None, or ``raw`` as an integer from ``minimum`` to :data:`MAX_INDEX` (not a bool, not a float);
    else :class:`InvalidOperation` saying ``name`` must be ``what``."""
    if raw is None:
        return None
    return checked_count(raw, name, what, minimum=minimum, field=field)


def checked_count(raw: object, name: str, what: str, *, minimum: int = 0, field: str | None = None) -> int:
    """``raw`` as an integer from ``minimum`` to :data:`MAX_INDEX` (an event index, a limit, a ``k``);
    else :class:`InvalidOperation` saying ``name`` must be ``what``."""
    if type(raw) is int and minimum <= raw <= MAX_INDEX:
        return raw
    value: int | None = None
    if not isinstance(raw, bool):
        try:
            value = operator.index(raw)  # type: ignore[arg-type]  # an int, or an integer type (numpy)
        except TypeError:
            value = None
    if value is None or value < minimum:
        raise InvalidOperation(f"{name} must be {what}, got {shown(raw)}", field=field or name)
    if value > MAX_INDEX:
        raise InvalidOperation(f"{name} must be {what} no larger than {MAX_INDEX}, got {shown(raw)}",
                               field=field or name)
    return value


def _trust(d: Mapping[str, Any]) -> int:
    raw = d.get("trust", DEFAULT_TRUST)
    if type(raw) is int and 0 <= raw <= 100:
        return raw
    if raw is None:
        return DEFAULT_TRUST
    if isinstance(raw, bool) or not isinstance(raw, int) or not 0 <= raw <= 100:
        raise InvalidOperation(f"'trust' must be an integer from 0 to 100, got {shown(raw, 200)}", field="trust")
    return raw


def _observed_at(d: Mapping[str, Any]) -> str | None:
    raw = _string(d, "observed_at", MAX_FIELD_CHARS)
    if raw is not None:
        try:
            datetime.fromisoformat(raw)
        except ValueError:
            raise InvalidOperation(f"'observed_at' is not ISO-8601: {raw!r}", field="observed_at") from None
    return raw


def valid_observed_at(raw: object) -> str | None:
    """``raw`` when it is an ``observed_at`` an operation admits, else None."""
    try:
        return _observed_at({"observed_at": raw})
    except InvalidOperation:
        return None


def _node_type(d: Mapping[str, Any]) -> str | None:
    raw = d.get("node_type")
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise InvalidOperation(f"'node_type' must be one of {', '.join(sorted(NODE_TYPES))}, got {shown(raw, 200)}"
                               [:200], field="node_type")
    problem = node_type_problem(raw)
    if problem is not None:
        raise InvalidOperation(problem, field="node_type")
    assert isinstance(raw, str)
    return raw


def parse_operation(d: Any, namespace: str = DEFAULT_NAMESPACE, key_edition: int = KEY_EDITION) -> Operation:
    """Validate one operation object (a JSON line of ``pmem apply``) into an :class:`Operation`."""
    if not isinstance(d, Mapping):
        raise InvalidOperation(f"an operation must be a JSON object, got {type(d).__name__}")
    op = d.get("op")
    if type(op) is not str or op not in _ALLOWED:
        given = "missing" if op is None else shown(op, 200)
        raise InvalidOperation(f"unknown op {given} (expected one of {', '.join(OPS)})", field="op")
    if not d.keys() <= _ALLOWED[op]:
        unknown = sorted(set(d) - _ALLOWED[op], key=lambda k: (0, k) if isinstance(k, str) else (1, type(k).__name__))
        hint = " (revise takes new_value)" if op == "revise" and "value" in unknown else ""
        field = unknown[0] if isinstance(unknown[0], str) else None
        raise InvalidOperation(f"unknown field {shown(unknown[0], 200)} for {op}{hint}", field=field)
    raw_key = _string(d, "key", MAX_FIELD_CHARS, required=True)
    assert raw_key is not None
    key = normalize_key(raw_key, key_edition)  # the store's key edition (pmem.domain.keys)
    if not key:
        raise InvalidOperation(f"key {raw_key!r} is empty after normalisation", field="key")
    ns = (_string(d, "namespace", MAX_FIELD_CHARS, blank=False) if "namespace" in d else None) or namespace
    if type(ns) is not str or not ns or ns.isspace() or not ns.isascii() or len(ns) > MAX_FIELD_CHARS // 4:
        ns = checked_namespace(ns)  # the store's namespace, when the line gives none
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
            raise InvalidOperation(f"'status' must be 'update' or 'correction', got {shown(status, 200)}",
                                   field="status")
        hard = d.get("hard_commit", False)
        if not isinstance(hard, bool):
            raise InvalidOperation(f"'hard_commit' must be true or false, got {shown(hard, 200)}", field="hard_commit")
        return Operation(
            op, ns, key,
            value=_string(d, "new_value", MAX_VALUE_BYTES, required=True, blank=False),
            evidence=evidence,
            old_value=_string(d, "old_value", MAX_VALUE_BYTES, blank=False),
            correction=status == "correction",
            hard_commit=hard,
        )
    value = _string(d, "value", MAX_VALUE_BYTES, required=op in VALUE_REQUIRED, blank=False)
    return Operation(op, ns, key, value=value, evidence=evidence)


def check_operation(op: object) -> None:
    """Raise :class:`InvalidOperation` unless ``op`` is an :class:`Operation` that could have come out of
    :func:`parse_operation` (or :func:`recorded_noop`): the same types, sizes and ranges. The key must be
    a non-empty string, but is not normalised again (system keys such as ``_extraction.failed`` are not
    normal keys)."""
    if _plain(op):
        return
    if not isinstance(op, Operation) or len(op) != len(Operation._fields):
        raise InvalidOperation(f"an operation must be a pmem.Operation, got {type(op).__name__}")
    kind, ns, key, value, ev, old, correction, hard, reason = op
    if type(kind) is not str or (kind not in _ALLOWED and kind != NOOP):
        raise InvalidOperation(f"unknown op {shown(kind, 200)} (expected one of {', '.join(OPS)})", field="op")
    _check(ns, "namespace", MAX_FIELD_CHARS, blank=False)
    _check(key, "key", MAX_FIELD_CHARS, blank=False)
    if value is None:
        if kind in VALUE_REQUIRED or kind == "revise":
            raise InvalidOperation("missing 'value'", field="value")
    else:
        _check(value, "value", MAX_VALUE_BYTES, blank=False)
    if old is not None:
        _check(old, "old_value", MAX_VALUE_BYTES, blank=False)
    for flag, name in ((correction, "correction"), (hard, "hard_commit")):
        if type(flag) is not bool:
            raise InvalidOperation(f"{name!r} must be true or false, got {shown(flag, 200)}", field=name)
    if reason is not None:
        _check(reason, "reason", MAX_TEXT_BYTES)
    _check_evidence(ev)


def _plain(op: object) -> bool:
    """The common case of :func:`check_operation`, checked cheaply (a batch checks hundreds of thousands):
    True when ``op`` is certainly valid; False when it needs the full check."""
    if type(op) is not Operation:
        return False
    kind, ns, key, value, ev, old, correction, hard, reason = op
    if type(ev) is not Evidence:
        return False
    text, source, trust, observed_at, op_id, node_type = ev
    return (
        type(ns) is str and type(key) is str and 0 < len(ns) <= _SHORT and 0 < len(key) <= _SHORT
        and ns.isascii() and key.isascii() and not ns.isspace() and not key.isspace()
        and (kind in _VALUE_OPTIONAL if value is None else kind in _ALLOWED and type(value) is str
             and 0 < len(value) <= MAX_VALUE_BYTES // 4 and value.isascii() and not value.isspace())
        and old is None and reason is None and correction is False and hard is False
        and type(trust) is int and 0 <= trust <= 100 and observed_at is None and node_type is None
        and (text is None or type(text) is str and 0 < len(text) <= MAX_TEXT_BYTES // 4 and text.isascii())
        and (source is None or type(source) is str and 0 < len(source) <= _SHORT and source.isascii())
        and (op_id is None or type(op_id) is str and 0 < len(op_id) <= _SHORT and op_id.isascii()))


_SHORT = MAX_FIELD_CHARS // 4  # characters of any string short enough to be within 1 KiB of UTF-8
_VALUE_OPTIONAL = frozenset(OPS) - VALUE_REQUIRED - {"revise"}


def _check_evidence(ev: object) -> None:
    if not isinstance(ev, Evidence) or len(ev) != len(Evidence._fields):
        raise InvalidOperation(f"'evidence' must be a pmem.Evidence, got {type(ev).__name__}", field="evidence")
    text, source, trust, observed_at, op_id, node_type = ev
    for raw, name, limit in ((text, "text", MAX_TEXT_BYTES), (source, "source", MAX_FIELD_CHARS),
                             (observed_at, "observed_at", MAX_FIELD_CHARS), (op_id, "op_id", MAX_FIELD_CHARS)):
        if raw is not None:
            _check(raw, name, limit)
    if type(trust) is not int or not 0 <= trust <= 100:
        raise InvalidOperation(f"'trust' must be an integer from 0 to 100, got {shown(trust, 200)}", field="trust")
    if observed_at is not None:
        _observed_at({"observed_at": observed_at})
    if node_type is not None:
        _node_type({"node_type": node_type})


def _check(raw: object, name: str, limit: int, *, blank: bool = True) -> None:
    if type(raw) is str and 0 < len(raw) <= limit // 4 and raw.isascii() and (blank or not raw.isspace()):
        return  # the common case, checked cheaply
    problem = string_problem(raw, name, limit, blank=blank)
    if problem is not None:
        raise InvalidOperation(problem, field=name)
