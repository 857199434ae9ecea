"""The one place a credential's policy is enforced, for every server (the HTTP API and the MCP server).

A :class:`GuardedStore` wraps an open :class:`~pmem.adapters.service.store.Store` for one caller:

- every call names a namespace (None: the credential's first); one outside the credential is
  :class:`~pmem.domain.errors.Forbidden`, and so is an operation whose own ``namespace`` field is;
- a read-only credential cannot write (:class:`Forbidden`);
- every write's ``source`` is the credential's: a differing claimed source is overwritten, and the
  receipt says so (``"source_set": {"claimed", "applied"}``);
- every write's ``trust`` is at most the credential's ``max_trust``: a claimed trust above it is lowered
  and the receipt says so (``"trust_capped": {"claimed", "applied"}``); a missing trust means the cap.
  Ingest goes through the same rewriting, below the extractor and annotator.

The memory inspector's reads (:meth:`GuardedStore.inspection`, docs/inspector.md) take the same namespace
check as every other read; they are read-only, so a read-only credential may make them.

Without a credential (``pmem serve --insecure-local``) everything is allowed and nothing is rewritten.
Results are plain JSON-able dicts in the shapes the CLI prints (each view's own ``to_dict``).

A resent ``op_id`` answers its first receipt (``duplicate``) only when key, op, value and source all match
the operation recorded under it (the source is the credential's, so a resend must come from the same
credential's source); otherwise it is a :class:`~pmem.domain.errors.RetryConflict` that names nothing of
the recorded operation, and nothing of the batch is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from pmem.adapters.service.credentials import Credential
from pmem.domain.errors import Forbidden, InvalidBatch, InvalidOperation
from pmem.domain.operations import Operation, checked_count, checked_namespace, parse_operation

if TYPE_CHECKING:
    from pmem.adapters.service.inspecting import Inspection
    from pmem.adapters.service.store import Store

MAX_PAGE = 1000
DEFAULT_PAGE = 100
MAX_LOG = 10_000
MAX_RECORDS = 10_000


class GuardedStore:
    """``store`` as ``credential`` may use it (None: everything allowed)."""

    def __init__(self, store: Store, credential: Credential | None) -> None:
        self.store = store
        self.credential = credential

    # -- writing ---------------------------------------------------------------
    def apply(self, ops: Sequence[Mapping[str, Any]], namespace: str | None = None) -> list[dict[str, Any]]:
        """Validate, rewrite (source, trust) and record ``ops`` atomically; their receipts, with notes."""
        ns = self._writable(namespace)
        if isinstance(ops, (str, bytes, Mapping)) or not isinstance(ops, Sequence):
            raise InvalidOperation(f"operations must be a JSON array of operations, got {type(ops).__name__}",
                                   field="operations")
        parsed: list[Operation] = []
        notes: list[dict[str, Any]] = []
        for n, d in enumerate(ops, 1):
            try:
                op = parse_operation(d, ns, self.store.key_edition)
            except InvalidOperation as e:
                raise InvalidBatch(str(e), line=n, field=e.field) from None
            self._allowed(op.namespace)
            op, note = self._rewritten(op, "trust" in d)
            parsed.append(op)
            notes.append(note)
        from pmem.adapters.eventstore.eventlog import strict_resends

        self._check_retries(parsed)
        with strict_resends():  # callers are several credentials: an op id alone is not a resend
            receipts = self.store.apply(parsed)
        return [{**r.to_dict(), **note} for r, note in zip(receipts, notes, strict=True)]

    def ingest(self, records: Sequence[str | Mapping[str, Any]], namespace: str | None = None) -> dict[str, Any]:
        """Text records (strings, or objects as an ingest JSON line) through the template extractor
        and the rule annotator, every write rewritten as :meth:`apply` does: ``{"receipts": [...]}``."""
        from pmem.adapters.service.ingest import Ingestor, make_extractor
        from pmem.adapters.sources.records import read_records

        ns = self._writable(namespace)
        if isinstance(records, (str, bytes, Mapping)) or not isinstance(records, Sequence):
            raise InvalidOperation(f"records must be a JSON array of strings or objects, got "
                                   f"{type(records).__name__}", field="records")
        if len(records) > MAX_RECORDS:
            raise InvalidOperation(f"at most {MAX_RECORDS} records per request, got {len(records)}", field="records")
        for n, r in enumerate(records, 1):
            if not isinstance(r, (str, Mapping)):
                raise InvalidBatch(f"a record must be a string or an object, got {type(r).__name__}", line=n)
        capped = {n: r["trust"] for n, r in enumerate(records, 1)
                  if isinstance(r, Mapping) and self._over_cap(r.get("trust"))}
        data = b"\n".join(_line(self._record(r), n) for n, r in enumerate(records, 1))
        ingestor = Ingestor(_Rewriting(self, ns), make_extractor("template", None, "jsonl"),  # type: ignore[arg-type]
                            source=self.credential.source if self.credential else "http")
        receipts = []
        for receipt in ingestor.run(read_records(data, "jsonl")):
            if receipt.get("record") in capped and self.credential is not None:
                receipt["trust_capped"] = {"claimed": capped[receipt["record"]], "applied": self.credential.max_trust}
            receipts.append(receipt)
        return {"receipts": receipts}

    # -- reading ---------------------------------------------------------------
    def get(self, key: str, namespace: str | None = None, as_of: int | None = None,
            disclose: Iterable[str] = ()) -> dict[str, Any]:
        return self.store.get(key, as_of=as_of, disclose=disclose, namespace=self._readable(namespace)).to_dict()

    def history(self, key: str, namespace: str | None = None, as_of: int | None = None) -> dict[str, Any]:
        return self.store.history(key, as_of=as_of, namespace=self._readable(namespace)).to_dict()

    def frontier(self, namespace: str | None = None, as_of: int | None = None, cursor: str | None = None,
                 limit: int = DEFAULT_PAGE, disclose: Iterable[str] = ()) -> dict[str, Any]:
        """One page of the frontier, by key: ``{"cells": [...], "next_cursor": KEY or None}``; the next
        page starts after ``cursor`` (the last key of the page before)."""
        checked_count(limit, "limit", f"a page size from 1 to {MAX_PAGE}", minimum=1)
        limit = min(limit, MAX_PAGE)
        cells = self.store.frontier(as_of=as_of, disclose=disclose, namespace=self._readable(namespace),
                                    after=cursor, limit=limit + 1)  # one more: is there a next page?
        page = cells[:limit]
        more = len(cells) > limit
        return {"cells": [c.to_dict() for c in page], "next_cursor": page[-1].key if more else None}

    def search(self, q: str, namespace: str | None = None, k: int = 12, as_of: int | None = None,
               ranking: str = "hybrid") -> list[dict[str, Any]]:
        return [r.to_dict() for r in self.store.search(q, k, as_of=as_of, namespace=self._readable(namespace),
                                                       ranking=ranking)]

    def read(self, question: str, namespace: str | None = None, mode: str = "cells", budget: int | None = None,
             as_of: int | None = None, **policy: Any) -> dict[str, Any]:
        """The context for ``question`` (``policy``: what ``Store.read`` takes besides, ``k``, ``disclose``...)."""
        return self.store.read(question, mode=mode, budget=budget, as_of=as_of,
                               namespace=self._readable(namespace), **policy).to_dict()

    def log(self, namespace: str | None = None, after: int = 0, limit: int | None = None) -> list[dict[str, Any]]:
        """Events of the namespace after index ``after``, at most ``limit`` (and at most 10,000)."""
        limit = MAX_LOG if limit is None else min(limit, MAX_LOG)
        return self.store.log(after=after, limit=limit, namespace=self._readable(namespace))

    def what_next(self, namespace: str | None = None, k: int = 5, previous: str | None = None,
                  as_of: int | None = None) -> list[dict[str, Any]]:
        """The best next questions, as ``pmem next`` prints them (from the stored scores: docs/graph.md)."""
        return self.store.what_next(k, previous=previous, as_of=as_of, namespace=self._readable(namespace))

    def graph(self, namespace: str | None = None, as_of: int | None = None) -> dict[str, Any]:
        """The entity graph as ``pmem graph export --format json`` prints it."""
        from pmem.adapters.graph import view as graph_view

        g = self.store.graph(as_of=as_of, namespace=self._readable(namespace), embed=True)
        out = graph_view.export(graph_view.entity_drawing(g), "json")
        assert isinstance(out, dict)
        return out

    def inspection(self, namespace: str | None = None) -> Inspection:
        """The memory inspector's reads (docs/inspector.md) over one namespace the credential may read."""
        from pmem.adapters.service.inspecting import Inspection

        return Inspection(self.store, self._readable(namespace))

    def stats(self, namespace: str | None = None) -> dict[str, Any]:
        """``pmem stats`` (counts over the whole store and projection lag: no namespace's data); a
        projection's stops name only the credential's namespaces (or every one)."""
        self._readable(namespace)
        out = self.store.stats()
        if self.credential is not None:
            mine = self.credential.namespaces
            for p in out["projections"].values():
                kept = [s for s in p.pop("stopped", ()) if s["namespace"] is None or s["namespace"] in mine]
                if kept:
                    p["stopped"] = kept
        return out

    # -- the policy ------------------------------------------------------------
    def namespace(self, namespace: str | None) -> str:
        """The namespace a call works in: the one named (checked), else the credential's first, else the
        store's."""
        if namespace is None:
            return self.credential.namespaces[0] if self.credential else self.store.namespace
        ns = checked_namespace(namespace)
        self._allowed(ns)
        return ns

    def _allowed(self, ns: str) -> None:
        if self.credential is not None and ns not in self.credential.namespaces:
            raise Forbidden(f"namespace {ns!r} is outside credential {self.credential.key_id}")

    def _readable(self, namespace: str | None) -> str:
        return self.namespace(namespace)

    def _writable(self, namespace: str | None) -> str:
        ns = self.namespace(namespace)
        if self.credential is not None and self.credential.read_only:
            raise Forbidden(f"credential {self.credential.key_id} is read-only")
        return ns

    def _record(self, r: str | Mapping[str, Any]) -> Any:
        """A record as an ingest JSON line, its trust capped (a missing one: the cap)."""
        if self.credential is None:
            return r
        d: dict[str, Any] = {"text": r} if isinstance(r, str) else dict(r)
        if "trust" not in d or self._over_cap(d["trust"]):
            d["trust"] = self.credential.max_trust
        return d

    def _over_cap(self, trust: object) -> bool:
        return (self.credential is not None and isinstance(trust, int) and not isinstance(trust, bool)
                and trust > self.credential.max_trust)

    def _rewritten(self, op: Operation, claimed_trust: bool) -> tuple[Operation, dict[str, Any]]:
        """``op`` with the credential's source and capped trust, and the receipt notes saying what changed."""
        c = self.credential
        if c is None:
            return op, {}
        note: dict[str, Any] = {}
        ev = op.evidence
        if ev.source is not None and ev.source != c.source:
            note["source_set"] = {"claimed": ev.source, "applied": c.source}
        trust = ev.trust if claimed_trust else c.max_trust
        if trust > c.max_trust:
            note["trust_capped"] = {"claimed": trust, "applied": c.max_trust}
            trust = c.max_trust
        return op._replace(evidence=ev._replace(source=c.source, trust=trust)), note

    def _check_retries(self, ops: Sequence[Operation]) -> None:
        """Refuse a batch that repeats an ``op_id`` with two different operations. (One already in the log
        is matched by the log itself, in its write transaction: ``eventlog.strict_resends``.)"""
        from pmem.adapters.eventstore.eventlog import resend_conflict

        batch: dict[tuple[str, str], Operation] = {}
        for op in ops:
            if op.evidence.op_id is not None:
                first = batch.setdefault((op.namespace, op.evidence.op_id), op)
                if _resent_as(op) != _resent_as(first):
                    raise resend_conflict(op)


def _resent_as(op: Operation) -> tuple[str, str, str | None, str | None]:
    """What a resend must repeat: key, op, source and value."""
    return op.key, op.op, op.evidence.source, op.value


def _line(record: Any, n: int) -> bytes:
    """One record as an ingest JSON line; a value JSON cannot carry (an integer past 64 bits) is bad input."""
    try:
        return orjson.dumps(record, option=orjson.OPT_NON_STR_KEYS)
    except orjson.JSONEncodeError as e:
        raise InvalidBatch(f"a record cannot be read: {e}", line=n) from None


class _Rewriting:
    """What the ingest path sees of the store: one namespace, and writes rewritten by the credential."""

    def __init__(self, guarded: GuardedStore, namespace: str) -> None:
        self._g, self.namespace = guarded, namespace
        self.key_edition = guarded.store.key_edition

    def get_many(self, keys: Iterable[str]) -> Any:
        return self._g.store.get_many(keys, namespace=self.namespace)

    def apply(self, ops: Iterable[Operation]) -> Any:
        """Ingest's writes; behind a credential, a resent record's op ids must repeat its facts (key, value,
        source: the op may be decided anew), so another credential cannot take them first."""
        from pmem.adapters.eventstore.eventlog import strict_resends

        rewritten = list(_each_rewritten(self._g, ops))
        if self._g.credential is None:
            return self._g.store.apply(rewritten)
        with strict_resends("fact"):
            return self._g.store.apply(rewritten)


def _each_rewritten(g: GuardedStore, ops: Iterable[Operation]) -> Iterator[Operation]:
    """Ingest's operations with the credential's source and trust at most its cap (the records' trust was
    capped already; this holds for every operation ingest writes, its failure records included)."""
    for op in ops:
        yield g._rewritten(op, True)[0]
