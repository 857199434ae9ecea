"""The write use case: validate operations, then record them atomically through the event log."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pmem.adapters.eventstore.gc_pause import no_gc
from pmem.adapters.service.bootstrap import Wiring
from pmem.adapters.service.doctor import write_checked
from pmem.domain.errors import InvalidBatch, InvalidOperation
from pmem.domain.keys import normalize_key
from pmem.domain.operations import (
    MAX_FIELD_CHARS,
    Operation,
    check_operation,
    checked_string,
    parse_operation,
    shown,
)
from pmem.domain.views import Receipt
from pmem.projections.graph import prerequisite_key


class Writes:
    """Typed operations in, receipts out; a bad operation writes nothing."""

    def __init__(self, wiring: Wiring) -> None:
        self.w = write_checked(wiring)  # a damaged file refuses the first write (service.doctor)

    def apply(self, operations: Iterable[Operation | Mapping[str, Any]]) -> list[Receipt]:
        """Validate every operation, then record them all atomically. A bad one raises
        :class:`InvalidBatch` naming its (1-based) position, and nothing is written. (``Operation``
        objects are checked by the event log, before anything is decided.)"""
        if isinstance(operations, (str, bytes, bytearray)) or not isinstance(operations, Iterable):
            raise InvalidOperation(f"operations must be a list of operations, got {type(operations).__name__}",
                                   field="operations")
        with no_gc():  # a big batch: long-lived operations and no cycles (docs/benchmarks.md, the write path)
            return self.w.log.get().execute(self._converted(operations))

    def _converted(self, operations: Iterable[Operation | Mapping[str, Any]]) -> list[Operation]:
        ops: list[Operation] = []
        namespace, key_edition = self.w.namespace, self.w.key_edition  # (read through a wrapper: once)
        for n, item in enumerate(operations, 1):
            if isinstance(item, Operation):
                ops.append(item)
                continue
            try:
                ops.append(parse_operation(item, namespace, key_edition))
            except InvalidOperation as e:
                _first_bad(ops)  # an Operation before this line that is bad too is named first
                raise InvalidBatch(str(e), line=n, field=e.field) from None
        return ops

    def apply_stream(self, chunks: Iterable[Sequence[Operation]], sink: Callable[[list[Receipt]], None]) -> int:
        """Record a batch given in chunks of parsed operations as one atomic batch, in memory bounded
        by a chunk (:meth:`pmem.adapters.eventstore.eventlog.EventLog.execute_stream`): each chunk's
        receipts go to ``sink`` before the commit; an exception from ``chunks`` writes nothing."""
        return self.w.log.get().execute_stream(chunks, sink)

    def one(self, op: str, key: str, value: str | None, **fields: Any) -> Receipt:
        """One operation given as arguments (``value`` is ``new_value`` for revise)."""
        d: dict[str, Any] = {"op": op, "key": key, **{k: v for k, v in fields.items() if v is not None}}
        if value is not None:
            d["new_value" if op == "revise" else "value"] = value
        return self.w.log.get().execute([parse_operation(d, self.w.namespace, self.w.key_edition)])[0]

    def declare_prerequisite(self, before: str, after: str, **evidence: Any) -> Receipt:
        """Record that ``after`` (a key or entity) may be asked or used only once ``before`` is known."""
        for name, v in (("before", before), ("after", after)):
            if not isinstance(v, str) or not normalize_key(v, self.w.key_edition):
                raise InvalidOperation(f"{name} must be a non-empty key, got {shown(v, 200)}", field=name)
            checked_string(v, name, MAX_FIELD_CHARS)
        return self.one("accept", prerequisite_key(before, after), json.dumps([before, after]), **evidence)


def _first_bad(ops: list[Operation]) -> None:
    """Raise :class:`InvalidBatch` for the first of ``ops`` (lines 1 to len) that is not a valid operation."""
    for n, op in enumerate(ops, 1):
        try:
            check_operation(op)
        except InvalidOperation as e:
            raise InvalidBatch(str(e), line=n, field=e.field) from None
