"""``ingest --format jsonl`` refuses a field it does not take, as ``apply`` does, so a misspelt field is never
silently dropped: the
record gets a receipt saying it was not read and why, nothing is written for it, and the rest of the
input goes on."""

from __future__ import annotations

import pytest

import pmem
from pmem.adapters.service.ingest import Ingestor
from pmem.adapters.sources.record import Record
from pmem.adapters.sources.records import JSONL_FIELDS, read_records
from pmem.domain.extraction.template import TemplateExtractor
from tests.e2e.test_cli import lines
from tests.e2e.test_cli import pmem as run_pmem

GOOD = b'{"text": "My 5K PB is now 25:50.", "source": "race results", "trust": 80}\n'


def test_a_record_with_an_unknown_field_is_not_read_and_says_which() -> None:
    (record,) = read_records(b'{"text": "My 5K PB is now 25:50.", "colour": "red", "mood": 1}\n', "jsonl")
    assert record == Record(1, None, problem=f"unknown field 'colour': the record was not read (a jsonl record "
                                             f"takes {', '.join(JSONL_FIELDS)})")


def test_every_field_a_record_takes_is_still_read() -> None:
    (record,) = read_records(b'{"text": "t", "source": "s", "trust": 70, "observed_at": "2024-01-01", '
                             b'"op_id": "o1", "confidence": 0.5, "node_type": "event"}\n', "jsonl")
    assert record == Record(1, "t", "s", 70, "2024-01-01", "o1", 0.5, "event")
    assert JSONL_FIELDS == ("text", "source", "trust", "observed_at", "op_id", "confidence", "node_type")


@pytest.mark.parametrize("field", ["value", "key", "op", "namespace", "speaker", "Text"])
def test_fields_of_operations_or_other_formats_are_unknown_too(field: str) -> None:
    (record,) = read_records(b'{"text": "My 5K PB is now 25:50.", "%s": "x"}\n' % field.encode(), "jsonl")
    assert record.text is None and record.problem is not None
    assert record.problem.startswith(f"unknown field {field!r}: the record was not read")


def test_ingest_writes_nothing_for_it_and_goes_on(store: pmem.Store) -> None:
    data = GOOD.replace(b"25:50", b"24:00")[:-2] + b', "trsut": 90}\n' + GOOD
    receipts = list(Ingestor(store, TemplateExtractor()).run(read_records(data, "jsonl")))
    assert [r["record"] for r in receipts] == [1, 2]
    first = receipts[0]
    assert (first["event_index"], first["op"], first["applied"]) == (None, "noop", False)
    assert first["reason"].startswith("unknown field 'trsut': the record was not read")
    assert receipts[1]["applied"] is True and receipts[1]["event_index"] == 1
    assert store.last_index() == 1 and store.get("5k pb").value == "25:50"


def test_the_cli_answers_it_with_a_receipt(db: str) -> None:
    r = run_pmem(db, "ingest", "-", "--format", "jsonl", stdin=b'{"text": "My 5K PB is now 24:00.", "x": 1}\n' + GOOD)
    assert r.returncode == 0 and r.stderr == b""
    first, second = lines(r.stdout)
    assert first["event_index"] is None and first["reason"].startswith("unknown field 'x'")
    assert second["applied"] is True
    with pmem.open(db) as store:
        assert [e["value"] for e in store.log()] == ["25:50"]
