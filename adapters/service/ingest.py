"""Ingest: read records, extract facts, annotate each against its cell, write through the Store (docs/ingest.md).

Records come as ``lines`` (one per line; blank lines are not records but still count in the numbering)
or ``jsonl`` (``{"text", "source"?, "trust"?, "observed_at"?, "op_id"?, "confidence"?, "node_type"?}`` or a
bare JSON string per line; ``confidence``, 0 to 1, replaces the extractor's own: below 0.6 the fact
contests; ``node_type`` replaces the extractor's graph node type for the record's facts), or
``locomo`` (the dialogue turns of LoCoMo conversations, see :mod:`pmem.adapters.sources.locomo`; a first-person key a
speaker states becomes ``<speaker>.<key>``, and receipts name the speaker and the turn's source). Every
record yields at least one receipt: a fact's receipt names the event it became, the op chosen and why,
and the head after it; a record that gave no fact (or an observation the store refused as input) gets a
receipt with ``event_index: null`` and the reason. Nothing is dropped silently.

Facts are written in stream order, in batches of distinct keys: a fact whose key is already waiting in
the batch first flushes it, so each annotation sees the head its predecessors left. (A concurrent writer
can change a head between the read and the write; the domain still decides on the cell as it is, so
the worst case is a recorded ``noop`` where a fresh read would have chosen another op.)

Ingest observes: running it twice on the same stream records every observation twice (a revision
chain replays). A jsonl record's ``op_id`` makes it idempotent: a resent record appends nothing and
gets its first receipt back (``"duplicate": true``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from pmem.adapters.llm.client import LlmSettings
from pmem.adapters.service.store import Store
from pmem.adapters.sources.record import Record
from pmem.domain.errors import ExtractorNotConfigured, InvalidOperation
from pmem.domain.extraction.annotate import EMPTY, Annotation, CellSnapshot, annotate
from pmem.domain.extraction.facts import Extraction, Fact, speaker_key
from pmem.domain.extraction.grounding import Utterance
from pmem.domain.extraction.slot_modes import DEFAULT_SLOT_MODE
from pmem.domain.extraction.template import DialogueTemplateExtractor, TemplateExtractor
from pmem.domain.operations import Evidence, Operation, parse_operation, recorded_noop, valid_observed_at
from pmem.domain.views import Receipt

if TYPE_CHECKING:
    from pmem.adapters.service.eager_index import EagerIndex
    from pmem.adapters.service.soft_keys import KeyIdentity

EXTRACTORS = ("template", "llm")
MAX_BATCH = 1000
READ_CHUNK = 2000  # records extracted, and their cells read, at a time
MAX_CACHED_CELLS = 200_000


Pending = tuple[Annotation | None, Operation, Record, dict[str, Any]] | dict[str, Any]
"""A fact (or, with no annotation, a recorded extraction failure) waiting to be written, or the finished
receipt of a record that gives no write."""

FAILURE_KEY = "_extraction.failed"
"""The cell that records extraction failures as ``noop`` events. No user key can name it: key
normalisation strips a leading ``_``. It never gets a head, so it never shows in the frontier."""

TURN_KEY = "_extraction.no_facts"
"""The cell that records a dialogue turn that gave no fact (a question, a reaction, facts all dropped
elsewhere are in :data:`FAILURE_KEY`) as a ``noop`` with the turn as evidence: reading by turns reads
the log, and a turn that is not in it could never be read (docs/ingest.md#locomo-conversations)."""

Annotator = Callable[[Fact, CellSnapshot], Annotation]


@dataclass(frozen=True, slots=True)
class _Unfactual:
    """A dialogue turn with no fact to write, to record under :data:`TURN_KEY` with this reason."""

    reason: str


class Extractor(Protocol):
    name: str

    def extract(self, text: str, record: int, said: Utterance | None = None) -> Extraction: ...


def make_extractor(name: str, llm: LlmSettings | None = None, fmt: str = "lines", verify: bool = True,
                   slots: str = DEFAULT_SLOT_MODE, reply_context: bool = False) -> Extractor:
    """The extractor called ``name`` for records of format ``fmt``; ``llm`` needs model settings (``--model``).
    The template extractor reads dialogue (``locomo``) with its statement form only; ``verify`` is the llm
    extractor's verification pass (docs/ingest.md#verification), ``slots`` when it asks the slot card
    (docs/ingest.md#slots; by default with the free-form pass, for every record), ``reply_context`` whether it
    shows the model the turn a dialogue turn answers (docs/ingest.md#reply-context; off by default)."""
    if name == "template":
        return DialogueTemplateExtractor() if fmt == "locomo" else TemplateExtractor()
    if name == "llm":
        if llm is None:
            raise ExtractorNotConfigured("llm extractor not configured: give --model (or set PMEM_LLM_MODEL), "
                                         "e.g. --model openai/qwen --api-base http://127.0.0.1:8080/v1")
        from pmem.adapters.llm.extractor import LlmExtractor

        return LlmExtractor(llm, verify=verify, slots=slots, reply_context=reply_context)
    raise InvalidOperation(f"unknown extractor {name!r} (expected one of {', '.join(EXTRACTORS)})",
                           field="extractor")


def llm_settings(model: str | None, api_base: str | None) -> LlmSettings | None:
    """Model settings from the CLI, else the environment (``PMEM_LLM_MODEL``, ``PMEM_LLM_BASE``); None if no model."""
    model = model or os.environ.get("PMEM_LLM_MODEL")
    if not model:
        return None
    return LlmSettings(model, api_base or os.environ.get("PMEM_LLM_BASE"), os.environ.get("PMEM_LLM_KEY"))


def make_annotator(name: str, llm: LlmSettings | None = None) -> Annotator:
    """The rule-based annotator, or the LLM one (validated the same way) when asked and configured."""
    if name == "rule":
        return annotate
    if name == "llm":
        if llm is None:
            raise ExtractorNotConfigured("llm annotator not configured: give --model (or set PMEM_LLM_MODEL)")
        from pmem.adapters.llm.extractor import LlmAnnotator

        return LlmAnnotator(llm)
    raise InvalidOperation(f"unknown annotator {name!r} (expected rule or llm)", field="annotator")


def make_identity(store: Store, mode: str, extractor: str, llm: LlmSettings | None,
                  threshold: float) -> KeyIdentity | None:
    """Soft key identity for an ingest, or None (``off``). ``on`` checks every fact's key; ``auto`` checks the
    keys worded freely: every fact of the llm extractor, and the template extractor's first-person
    statements, while its cloze and ALFWorld keys keep exact identity (the extractor names the relation)."""
    if mode not in ("auto", "on", "off"):
        raise InvalidOperation(f"--soft-keys must be auto, on or off, got {mode!r}", field="soft-keys")
    if not 0 < threshold <= 1:
        raise InvalidOperation(f"--key-threshold must be in (0, 1], got {threshold}", field="key-threshold")
    if mode == "off":
        return None
    from pmem.adapters.llm.extractor import LlmKeyJudge
    from pmem.adapters.service.soft_keys import KeyIdentity
    from pmem.domain.extraction.key_identity import same_key

    judge = LlmKeyJudge(llm) if llm is not None else same_key
    scope = "free-form" if mode == "auto" and extractor != "llm" else "all"
    # The store's embedder (onnx by default), behind the text cache in the store file; both the
    # embedder and the registry are loaded when the first fact to check comes.
    return KeyIdentity(store, store.embedder, threshold=threshold, judge=judge, scope=scope)


class Ingestor:
    """Extract -> annotate -> write, one receipt (a dict) per fact or per record without facts."""

    def __init__(self, store: Store, extractor: Extractor, *, source: str = "ingest",
                 annotator: Annotator = annotate, identity: KeyIdentity | None = None,
                 index: EagerIndex | None = None) -> None:
        self.store = store
        self.index = index  # brings the search projections up once the ingest has written (eager_index)
        self.extractor = extractor
        self.annotator = annotator
        self.identity = identity
        self.timings = {"extraction": 0.0, "identity": 0.0, "append": 0.0}  # seconds, for the benchmark
        self.source = source
        self._cells: dict[str, CellSnapshot] = {}

    def run(self, records: Iterable[Record]) -> Iterator[dict[str, Any]]:
        """Receipts in input order (a record without facts waits behind the facts still unwritten)."""
        pending: list[Pending] = []
        keys: set[str] = set()
        for chunk in _chunks(records, READ_CHUNK):
            started = time.perf_counter()
            extracted = [(r, None if r.text is None else self._extract(r)) for r in chunk]
            self.timings["extraction"] += time.perf_counter() - started
            chunk_keys = {f.key for _, x in extracted if x is not None for f in x.facts}
            checked = set() if self.identity is None else {f.key for _, x in extracted if x is not None
                                                            for f in x.facts if self.identity.covers(f.form)}
            if self.identity is not None and checked:
                started = time.perf_counter()
                self.identity.prepare(checked)
                self.timings["identity"] += time.perf_counter() - started
            self._prefetch(chunk_keys)
            for record, extraction in extracted:
                for item in self._facts(record, extraction):
                    if isinstance(item, dict):
                        pending.append(item)
                        continue
                    if isinstance(item, str):
                        pending.append((None, self._noop(record, FAILURE_KEY, item), record, {}))
                        continue
                    if isinstance(item, _Unfactual):
                        pending.append((None, self._noop(record, TURN_KEY, item.reason), record, {}))
                        continue
                    fact, i = item
                    if self.identity is not None and self.identity.covers(fact.form):
                        fact, extra = self._route(fact, record, pending)
                    else:
                        extra = {}
                    if fact.key in keys or len(pending) >= MAX_BATCH:
                        yield from self._flush(pending)  # so the annotation sees the head those left
                        pending, keys = [], set()
                    cell = self._cell(fact.key)
                    extra["conflict"] = cell.value is not None and fact.value != cell.value
                    annotation = self.annotator(fact, cell)
                    try:
                        op = parse_operation(self._op_dict(annotation, record, i), self.store.namespace,
                                             self.store.key_edition)
                    except InvalidOperation as e:
                        pending.append(_unwritten(record, fact.key, f"invalid observation: {e}"))
                        continue
                    pending.append((annotation, op, record, extra))
                    keys.add(fact.key)
        yield from self._flush(pending)
        if self.index is not None:
            self.index.finish()

    def _extract(self, r: Record) -> Extraction:
        """The record's extraction; a dialogue turn also tells the extractor who said it, to whom and when."""
        assert r.text is not None
        if r.speaker is None:
            return self.extractor.extract(r.text, r.number)
        return self.extractor.extract(r.text, r.number, Utterance(r.speaker, r.listeners, r.observed_at, r.replying_to))

    @staticmethod
    def _facts(record: Record, extraction: Extraction | None
               ) -> Iterator[tuple[Fact, int] | dict[str, Any] | str | _Unfactual]:
        """The record's facts (with their position), the receipt saying why it has none to write, (a
        string) an extraction failure or dropped fact to record in the log, or a dialogue turn without
        facts to record."""
        if extraction is None:
            yield _unwritten(record, None, record.problem or "unreadable record")
            return
        if extraction.dropped:
            yield from (f"dropped {why}" for why in extraction.dropped)  # "dropped fact 2 (key 'x'): why"
        if extraction.failed:
            yield extraction.reason or "extraction failed"
        elif not extraction.facts:
            if extraction.dropped:  # the dropped facts' noops already account for the record
                return
            reason = extraction.reason or "no facts"
            said = record.speaker is not None and bool(record.text and record.text.strip())
            yield _Unfactual(reason) if said else _unwritten(record, None, reason)  # (an empty turn: nothing to read)
        elif record.confidence is not None and not _is_confidence(record.confidence):
            yield _unwritten(record, extraction.facts[0].key, "invalid observation: 'confidence' must be a "
                             f"number from 0 to 1, got {record.confidence!r}")
        else:
            for i, fact in enumerate(extraction.facts):
                if record.confidence is not None:
                    fact = replace(fact, confidence=float(record.confidence))
                if record.speaker is not None:
                    fact = replace(fact, key=speaker_key(record.speaker, fact.key))
                yield fact, i

    def _cell(self, key: str) -> CellSnapshot:
        if key not in self._cells:  # forgotten since the prefetch (contested, or a resent op_id)
            self._prefetch({key})
        return self._cells[key]

    def _prefetch(self, keys: set[str]) -> None:
        """Read the heads of the keys not known yet, in one go."""
        if len(self._cells) > MAX_CACHED_CELLS:
            self._cells.clear()
        missing = [k for k in keys if k not in self._cells]
        for key, view in (self.store.get_many(missing).items() if missing else ()):
            self._cells[key] = EMPTY if view.value is None else CellSnapshot(view.value, view.status,
                                                                            view.alternatives)

    def _op_dict(self, a: Annotation, record: Record, i: int) -> dict[str, Any]:
        d: dict[str, Any] = {"op": a.op, "key": a.fact.key, "value": a.fact.value, "text": a.fact.text,
                             "source": record.source or f"{self.source}:{record.number}"}
        if record.trust is not None:
            d["trust"] = record.trust
        if record.observed_at is not None:
            d["observed_at"] = record.observed_at
        if record.op_id is not None:
            d["op_id"] = record.op_id if i == 0 else f"{record.op_id}#{i}"
        node_type = a.fact.node_type if record.node_type is None else record.node_type
        if node_type is not None:
            d["node_type"] = node_type  # checked by parse_operation: a bad one is an "invalid observation"
        return d

    def _route(self, fact: Fact, record: Record, pending: list[Pending]) -> tuple[Fact, dict[str, Any]]:
        """Send ``fact`` to the cell soft key identity chooses; queue the merge event if it makes one."""
        assert self.identity is not None
        started = time.perf_counter()
        res = self.identity.resolve(fact.key)
        self.timings["identity"] += time.perf_counter() - started
        if res.merge is not None:
            pending.append((None, res.merge, record, {"identity": "merge", "reason": res.why}))
        extra = res.receipt_fields()
        if res.key != fact.key:
            extra["extracted_key"] = fact.key
        return (fact if res.key == fact.key else replace(fact, key=res.key)), extra

    def _noop(self, record: Record, key: str, reason: str) -> Operation:
        """The ``noop`` on the system cell ``key`` that records ``record`` in the log with its evidence
        (an extraction failure, a dropped fact, a dialogue turn without facts). The record's date goes
        with it when it is a valid one: the noop must never fail its batch over a field a fact would refuse."""
        evidence = Evidence(record.text[:1_000_000] if record.text else None,
                            record.source if isinstance(record.source, str) else f"{self.source}:{record.number}",
                            observed_at=valid_observed_at(record.observed_at))
        return recorded_noop(self.store.namespace, key, reason[:1000], evidence)

    def _flush(self, pending: list[Pending]) -> Iterator[dict[str, Any]]:
        writes = [p for p in pending if isinstance(p, tuple)]
        started = time.perf_counter()
        receipts = iter(self.store.apply([op for _, op, _, _ in writes]) if writes else [])
        self.timings["append"] += time.perf_counter() - started
        for item in pending:
            if isinstance(item, dict):
                yield item
                continue
            annotation, _, record, extra = item
            receipt = next(receipts)
            if annotation is None:
                yield {**receipt.to_dict(), "record": record.number, "text": record.text, **extra, **_said(record)}
                continue
            self._remember(annotation.fact.key, receipt)
            d = _written(record, annotation, receipt)
            d.update(extra)
            yield d

    def _remember(self, key: str, r: Receipt) -> None:
        if r.duplicate:
            self._cells.pop(key, None)  # an old receipt's head may be stale: read the cell when next needed
        elif r.head is None:
            self._cells[key] = EMPTY
        elif r.head.status == "active":
            self._cells[key] = CellSnapshot(r.head.value, "active")
        else:
            self._cells.pop(key, None)  # contested: read its alternatives back when next needed


def _chunks(items: Iterable[Record], size: int) -> Iterator[list[Record]]:
    chunk: list[Record] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _is_confidence(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and 0 <= x <= 1


def _written(record: Record, a: Annotation, r: Receipt) -> dict[str, Any]:
    d = r.to_dict()
    if r.duplicate:  # the first receipt, not a fresh decision: the annotation's reasoning does not apply
        d["reason"] = r.reason or "already recorded under this op_id"
    else:
        d["reason"] = r.reason or (a.invalid if not r.applied else None) or a.why
    d["record"] = record.number
    d["assertion"] = a.fact.status
    d["form"] = a.fact.form
    d.update(_said(record))
    return d


def _unwritten(record: Record, key: str | None, reason: str) -> dict[str, Any]:
    return {"event_index": None, "key": key, "op": "noop", "applied": False, "reason": reason, "head": None,
            "record": record.number, "text": record.text, **_said(record)}


def _said(record: Record) -> dict[str, Any]:
    """Who said a dialogue record and where it is (``speaker``, ``source``); nothing for other formats."""
    return {} if record.speaker is None else {"speaker": record.speaker, "source": record.source}
