"""Typed operations (the commands agents send), decoded through the one schema (docs/concepts.md).

The schema is :mod:`pmem.domain.op_schema` (``msgspec`` structs). :func:`parse_operation` converts one
mapping into its struct and :func:`from_struct` makes the struct an :class:`Operation`, after the checks
a schema cannot express (:func:`semantic_problem`, applied once). A bad operation raises
:class:`~domain.errors.InvalidOperation` naming the field that is wrong, in one line. Validation is
complete before anything is written, so a batch with one bad line writes nothing.

An operation decoded this way is a :class:`Decoded`; the event log passes it through
:func:`check_operation` without checking again. An :class:`Operation` built directly (the Python API
admits one) is checked there against the same structs, once.

The arguments of the public entry points are checked here too (docs/decisions.md, "Input
validation"): :func:`checked_namespace`, :func:`checked_string`, :func:`checked_count` and
:func:`optional_count`.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping
from datetime import datetime
from functools import lru_cache
from typing import Any, NamedTuple

import msgspec

from pmem.domain import op_schema
from pmem.domain.errors import InvalidOperation
from pmem.domain.keys import KEY_EDITION, normalize_key
from pmem.domain.op_schema import STRUCTS, Noop, Op, OpStruct, Revise

# The limits live in the schema; named here too, where callers have always found them.
DEFAULT_TRUST, MAX_FIELD_CHARS, MAX_TEXT_BYTES, MAX_VALUE_BYTES, OPS = (
    op_schema.DEFAULT_TRUST, op_schema.MAX_FIELD_CHARS, op_schema.MAX_TEXT_BYTES, op_schema.MAX_VALUE_BYTES,
    op_schema.OPS)
VALUE_REQUIRED = frozenset({"accept", "contest", "resolve"})
DEFAULT_NAMESPACE = "default"
MAX_INDEX = 2**63 - 1
"""The largest event index, count or size an argument may give: a signed 64-bit integer, what SQLite and
PostgreSQL store."""


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




# -- the one decoding: mapping -> struct (the schema) -> semantic checks -> Operation ----------------------

class Decoded(Operation):
    """An :class:`Operation` made by :func:`from_struct`: it passed the schema and the semantic checks,
    so :func:`check_operation` does not check it again."""

    __slots__ = ()


_DECODER = msgspec.json.Decoder(OpStruct)
_ENCODER = msgspec.json.Encoder()
_PLAIN = (str, int, bool, type(None))
_REFUSED = (msgspec.ValidationError, msgspec.DecodeError, msgspec.EncodeError, ValueError, OverflowError, TypeError)
_ANY_STRUCT = OpStruct | Noop
_NO_BLANK = frozenset({"namespace", "value", "new_value", "old_value"})  # whitespace only is no value



DISCLOSURES = frozenset({"history", "alternatives", "support"})  # what a read may disclose beside the value


def disclosures(disclose: object) -> frozenset[str]:
    """The disclosure modes asked for (``history``, ``alternatives``, ``support``), from a list of names
    (not a bare string); anything else is :class:`InvalidOperation` naming ``disclose``."""
    if isinstance(disclose, (str, bytes, bytearray)) or not isinstance(disclose, Iterable):
        raise InvalidOperation(f"disclose must be a list of disclosures, got {type(disclose).__name__}",
                               field="disclose")
    listed = list(disclose)
    odd = next((m for m in listed if not isinstance(m, str)), None)
    if odd is not None:
        raise InvalidOperation(f"disclose must list strings, got {type(odd).__name__}", field="disclose")
    modes = frozenset(m.strip() for m in listed if m.strip())
    bad = sorted(modes - DISCLOSURES)
    if bad:
        raise InvalidOperation(f"unknown disclosure {bad[0]!r} (expected history, alternatives or support)",
                               field="disclose")
    return modes


def parse_operation(d: Any, namespace: str = DEFAULT_NAMESPACE, key_edition: int = KEY_EDITION) -> Operation:
    """One operation object (a JSON line of ``pmem apply``, a dict of the Python API) decoded into its
    struct, then into an :class:`Operation` (keys by ``key_edition``; ``namespace`` where it gives none)."""
    return from_struct(to_struct(d, OpStruct), namespace, key_edition)


def to_struct(d: Any, schema: Any = OpStruct) -> Op:
    """``d`` converted into its struct of ``schema``, or :class:`InvalidOperation` saying which field is
    wrong. A plain dict of plain JSON values is encoded to JSON and decoded by type: several times faster
    than ``msgspec.convert``, which takes the rest (so no value is made a string that was not one)."""
    if schema is OpStruct and type(d) is dict and all(type(k) is str and type(v) in _PLAIN for k, v in d.items()):
        try:
            struct: Op = _DECODER.decode(_ENCODER.encode(d))
            return struct
        except _REFUSED:
            pass  # told apart below, field by field
    try:
        struct = msgspec.convert(dict(d) if isinstance(d, Mapping) else d, schema)
        return struct
    except _REFUSED as e:
        message, field = refusal(d, e, schema is OpStruct)
        raise InvalidOperation(message, field=field) from None


def from_struct(s: Op, namespace: str, key_edition: int) -> Decoded:
    """The operation a decoded struct ``s`` stands for, after the checks its schema cannot express."""
    if not _plain(s):
        problem = semantic_problem(s)
        if problem is not None:
            raise InvalidOperation(problem[0], field=problem[1])
    key = _key(s.key, key_edition)
    if not key:
        raise InvalidOperation(f"key {s.key!r} is empty after normalisation", field="key")
    ns = namespace if s.namespace is None else s.namespace
    if type(ns) is not str or not ns or ns.isspace() or not ns.isascii() or len(ns) > MAX_FIELD_CHARS // 4:
        ns = checked_namespace(ns)  # the store's namespace, when the operation gives none
    ev = Evidence(s.text, s.source, DEFAULT_TRUST if s.trust is None else s.trust, s.observed_at, s.op_id,
                  s.node_type)
    if type(s) is Revise:
        return Decoded("revise", ns, key, s.new_value, ev, s.old_value, s.status == "correction", s.hard_commit)
    return Decoded(_TAGS[type(s)], ns, key, getattr(s, "value", None), ev, None, False, False,
                   getattr(s, "reason", None))


_TAGS: dict[type, str] = {cls: tag for tag, cls in STRUCTS.items()}


def _plain(s: Op) -> bool:
    """True when ``s`` certainly passes :func:`semantic_problem` (the common case, checked cheaply: ASCII
    strings are within their byte limits and free of surrogates)."""
    value: str | None
    old: str | None
    if type(s) is Revise:
        value, old = s.new_value, s.old_value
    else:
        value, old = getattr(s, "value", None), getattr(s, "reason", None)
    ns = s.namespace
    return (s.key.isascii() and (ns is None or ns.isascii() and not ns.isspace())
            and (value is None or value.isascii() and not value.isspace())
            and (old is None or old.isascii() and not old.isspace() and type(s) is Revise)
            and (s.text is None or s.text.isascii()) and (s.source is None or s.source.isascii())
            and (s.op_id is None or s.op_id.isascii()) and (s.observed_at is None or _iso(s.observed_at)))


def semantic_problem(s: Op) -> tuple[str, str] | None:
    """What the schema cannot say about ``s``: (why, which field), or None. Strings: their size in bytes
    of UTF-8, no lone surrogate, not whitespace only where a value is meant; ``observed_at``: ISO-8601."""
    for name, limit in _LIMITS[type(s)]:
        raw = getattr(s, name)
        if raw is not None:
            problem = string_problem(raw, name, limit, blank=name not in _NO_BLANK)
            if problem is not None:
                return problem, name
    if s.observed_at is not None and not _iso(s.observed_at):
        return f"'observed_at' is not ISO-8601: {s.observed_at!r}", "observed_at"
    return None


def _string_limits(cls: type[Op]) -> tuple[tuple[str, int], ...]:
    """Each string field of ``cls`` with its limit in bytes, read from the schema (its length in characters)."""
    out = []
    for f in _fields(cls):
        for sub in _alternatives(f.type):
            if isinstance(sub, msgspec.inspect.StrType) and sub.max_length is not None:
                out.append((f.name, sub.max_length))
    return tuple(out)


def _fields(cls: type[Op]) -> tuple[msgspec.inspect.Field, ...]:
    info = msgspec.inspect.type_info(cls)
    assert isinstance(info, msgspec.inspect.StructType)
    return info.fields


def _alternatives(t: msgspec.inspect.Type) -> tuple[msgspec.inspect.Type, ...]:
    """The types a field's type admits, without their descriptions (``Metadata``)."""
    types = t.types if isinstance(t, msgspec.inspect.UnionType) else (t,)
    return tuple(sub.type if isinstance(sub, msgspec.inspect.Metadata) else sub for sub in types)


_LIMITS = {cls: _string_limits(cls) for cls in STRUCTS.values()}


def _iso(raw: str) -> bool:
    try:
        datetime.fromisoformat(raw)
    except ValueError:
        return False
    return True


def valid_observed_at(raw: object) -> str | None:
    """``raw`` when it is an ``observed_at`` an operation admits, else None."""
    if type(raw) is not str or string_problem(raw, "observed_at", MAX_FIELD_CHARS) is not None or not _iso(raw):
        return None
    return raw


@lru_cache(maxsize=65536)
def _key(raw: str, edition: int) -> str:
    """The normalised key (a batch names the same keys again and again)."""
    return normalize_key(raw, edition)


# -- why the schema refused an operation: one line naming the field ----------------------------------------

def refusal(d: Any, error: Exception, agent: bool = True) -> tuple[str, str | None]:
    """Why ``d`` does not fit the schema, as (message, field), read from the structs' own type
    information (the first problem, in the structs' field order); ``msgspec``'s message where no
    rule below names it. ``agent``: the ops agents send (not the internal ``noop``)."""
    if not isinstance(d, Mapping):
        return f"an operation must be a JSON object, got {type(d).__name__}", None
    op = d.get("op")
    known = OPS if agent else (*OPS, NOOP)
    if type(op) is not str or op not in known:
        given = "missing" if op is None else shown(op, 200)
        return f"unknown op {given} (expected one of {', '.join(OPS)})", "op"
    fields = _fields(STRUCTS[op])
    unknown = sorted(set(d) - {f.name for f in fields} - {"op"},
                     key=lambda k: (0, k) if isinstance(k, str) else (1, type(k).__name__))
    if unknown:
        hint = " (revise takes new_value)" if op == "revise" and "value" in unknown else ""
        field = unknown[0] if isinstance(unknown[0], str) else None
        return f"unknown field {shown(unknown[0], 200)} for {op}{hint}", field
    for f in fields:
        problem = _field_problem(f, d[f.name]) if f.name in d else (f"missing {f.name!r}" if f.required else None)
        if problem is not None:
            return problem, f.name
    return str(error).splitlines()[0] if str(error) else type(error).__name__, None


def _field_problem(f: msgspec.inspect.Field, raw: object) -> str | None:
    name, types = f.name, _alternatives(f.type)
    if raw is None:
        if f.required:
            return f"missing {name!r}"
        if any(isinstance(sub, msgspec.inspect.NoneType) for sub in types):
            return None
    kind = next(sub for sub in types if not isinstance(sub, msgspec.inspect.NoneType))
    if isinstance(kind, msgspec.inspect.StrType):
        return string_problem(raw, name, kind.max_length or MAX_TEXT_BYTES)
    if isinstance(kind, msgspec.inspect.IntType):
        ok = type(raw) is int and (kind.ge is None or raw >= kind.ge) and (kind.le is None or raw <= kind.le)
        return None if ok else f"{name!r} must be an integer from {kind.ge} to {kind.le}, got {shown(raw, 200)}"
    if isinstance(kind, msgspec.inspect.BoolType):
        return None if isinstance(raw, bool) else f"{name!r} must be true or false, got {shown(raw, 200)}"
    if isinstance(kind, msgspec.inspect.LiteralType):
        ok = type(raw) is str and raw in kind.values
        return None if ok else f"{name!r} must be one of {', '.join(map(str, kind.values))}, got {shown(raw, 200)}"
    return None


# -- an Operation built directly: checked against the same structs ----------------------------------------

def check_operation(op: object) -> None:
    """Raise :class:`InvalidOperation` unless ``op`` is an :class:`Operation` that fits the schema (as
    :func:`parse_operation` or :func:`recorded_noop` would make it). A :class:`Decoded` one already did,
    and passes at once. The key must be a non-empty string, but is not normalised again (system keys
    such as ``_extraction.failed`` are not normal keys)."""
    if type(op) is Decoded:
        return
    if not isinstance(op, Operation) or len(op) != len(Operation._fields):
        raise InvalidOperation(f"an operation must be a pmem.Operation, got {type(op).__name__}")
    kind, ns, key, value, ev, old, correction, hard, reason = op
    if not isinstance(ev, Evidence) or len(ev) != len(Evidence._fields):
        raise InvalidOperation(f"'evidence' must be a pmem.Evidence, got {type(ev).__name__}", field="evidence")
    checked_string(ns, "namespace", field="namespace")
    for flag, name in ((correction, "correction"), (hard, "hard_commit")):
        if type(flag) is not bool:
            raise InvalidOperation(f"{name!r} must be true or false, got {shown(flag, 200)}", field=name)
    if ev.trust is None:
        raise InvalidOperation("'trust' must be an integer from 0 to 100, got None", field="trust")
    d: dict[str, Any] = {name: v for name, v in zip(Evidence._fields, ev, strict=True) if v is not None}
    d.update(op=kind, key=key, namespace=ns)
    if kind == "revise":
        d.update(new_value=value, status="correction" if correction else "update", hard_commit=hard)
    elif value is not None:
        d["value"] = value
    for name, v in (("old_value", old), ("reason", reason)):
        if v is not None:
            d[name] = v
    if kind == "revise" and value is None:
        raise InvalidOperation("missing 'new_value'", field="new_value")
    s = to_struct(d, _ANY_STRUCT)
    problem = semantic_problem(s)
    if problem is None and isinstance(key, str) and key.isspace():
        problem = "'key' is empty (whitespace only)", "key"
    if problem is not None:
        raise InvalidOperation(problem[0], field=problem[1])
