"""Input records for ingest: one per line (``lines``), one JSON object or string per line (``jsonl``),
or the dialogue turns of LoCoMo conversations (``locomo``, :mod:`.locomo`). A record that cannot even be
read still comes out, carrying its problem, so ingest can answer it with a receipt."""

from __future__ import annotations

from collections.abc import Iterator

import orjson

from pmem.domain.errors import InvalidOperation
from pmem.domain.operations import shown

from .record import Record

FORMATS = ("lines", "jsonl", "locomo")
JSONL_FIELDS = ("text", "source", "trust", "observed_at", "op_id", "confidence", "node_type")  # of a jsonl object


def read_records(data: bytes, fmt: str) -> Iterator[Record]:
    """Split ``data`` into records; unreadable ones carry the problem instead of text."""
    if fmt not in FORMATS:
        raise InvalidOperation(f"unknown format {fmt!r} (expected lines, jsonl or locomo)", field="format")
    if fmt == "locomo":  # one JSON document, checked whole before the first record comes out
        from pmem.adapters.sources.locomo import locomo_records

        yield from locomo_records(data)
        return
    for n, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            yield Record(n, None, problem=f"invalid UTF-8 at byte {e.start}")
            continue
        yield Record(n, line.rstrip("\r")) if fmt == "lines" else _json_record(n, line)


def _json_record(n: int, line: str) -> Record:
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as e:
        return Record(n, None, problem=f"malformed JSON: {e}")
    if isinstance(obj, str):
        return Record(n, obj)
    if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
        return Record(n, None, problem="a jsonl record must be a string or an object with a string 'text'")
    unknown = sorted(set(obj) - set(JSONL_FIELDS))
    if unknown:  # as apply refuses an operation with a field it does not take
        return Record(n, None, problem=f"unknown field {shown(unknown[0], 200)}: the record was not read (a jsonl "
                                       f"record takes {', '.join(JSONL_FIELDS)})")
    return Record(n, obj["text"], obj.get("source"), obj.get("trust"), obj.get("observed_at"), obj.get("op_id"),
                  obj.get("confidence"), obj.get("node_type"))
