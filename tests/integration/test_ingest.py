"""Extraction and ingest against a real store: the FactConsolidation 6k stream, ALFWorld revision chains,
statements, and the annotator's validation agreeing with what the domain records."""

from __future__ import annotations

import json
import re
from collections import defaultdict

import pytest

import pmem
from pmem.adapters.service.ingest import Ingestor, Record, make_extractor
from pmem.adapters.sources.records import read_records
from pmem.domain.errors import ExtractorNotConfigured, InvalidOperation
from pmem.domain.extraction.annotate import CellSnapshot, annotate
from pmem.domain.extraction.cloze import TEMPLATES
from pmem.domain.extraction.template import TemplateExtractor
from tests.conftest import ROOT

FC = ROOT / "tests" / "data" / "factconsolidation"  # vendored, MIT: tests/data/README.md
CONTEXT = FC / "factconsolidation_6k_context.txt"


def fact_lines() -> list[tuple[int, str]]:
    """(serial number, sentence without its final full stop) of every ``i. fact.`` line."""
    out = []
    for line in CONTEXT.read_text().splitlines():
        m = re.fullmatch(r"(\d+)\. (.*)\.", line)
        if m:
            out.append((int(m.group(1)), m.group(2)))
    return out


def independent_slots() -> dict[tuple[str, str], list[tuple[int, str]]]:
    """Group lines by (subject, template) straight from the MQuAKE template file: every template as a
    regex, the one with the most literal text wins. Values in serial order."""
    raw = json.loads((FC / "mquake_templates" / "cloze_templates.json").read_text())
    rules = []
    for template in set(raw.values()):
        before, after = template.removesuffix("__").split("[X]")
        rules.append((len(before) + len(after), template, re.compile(re.escape(before) + "(.+?)" + re.escape(after)
                                                                    + "(.+)")))
    rules.sort(key=lambda r: -r[0])
    slots: dict[tuple[str, str], list[tuple[int, str]]] = defaultdict(list)
    for serial, sentence in fact_lines():
        subject, obj, template = next((m.group(1), m.group(2), t) for _, t, rx in rules
                                      if (m := rx.fullmatch(sentence)))
        slots[subject, template].append((serial, obj))
    return slots


def test_the_code_templates_are_the_mquake_ones_misspellings_included() -> None:
    raw = json.loads((FC / "mquake_templates" / "cloze_templates.json").read_text())
    assert {pid: t.strip() for pid, t in raw.items()} == {pid: t for pid, (t, _) in TEMPLATES.items()}


def test_every_fact_line_of_the_6k_context_gives_exactly_one_fact() -> None:
    x = TemplateExtractor()
    lines = CONTEXT.read_text().splitlines()
    results = [x.extract(line, n) for n, line in enumerate(lines, 1)]
    assert len(lines) == 456
    assert results[0].facts == () and results[0].reason == "no template matched"  # the header
    assert all(len(r.facts) == 1 for r in results[1:])
    assert sum(len(r.facts) for r in results) == 455


def test_ingesting_the_6k_stream_leaves_294_cells_each_holding_its_later_value(store: pmem.Store) -> None:
    slots = independent_slots()
    assert len(slots) == 294 and sum(len(v) == 2 for v in slots.values()) == 161  # data/README's figures
    receipts = list(Ingestor(store, TemplateExtractor(), source="fc6k").run(
        read_records(CONTEXT.read_bytes(), "lines")))
    written = [r for r in receipts if r["event_index"] is not None]
    assert len(written) == 455 and all(r["applied"] for r in written)
    assert [r["reason"] for r in receipts if r["event_index"] is None] == ["no template matched"]

    x = TemplateExtractor()
    key_of = {slot: {x.extract(f"{s}. {_render(slot, o)}.", 1).facts[0].key for s, o in values}
              for slot, values in slots.items()}
    assert all(len(keys) == 1 for keys in key_of.values())  # one key per slot ...
    assert len({k for keys in key_of.values() for k in keys}) == 294  # ... and one slot per key
    frontier = {c.key: c for c in store.frontier()}
    assert len(frontier) == 294
    for slot, values in slots.items():
        (key,) = key_of[slot]
        later = max(values)[1]
        assert frontier[key].value == later and frontier[key].status == "active", slot
        if len(values) == 2:
            assert [v.status for v in store.history(key).versions] == ["superseded", "active"]


def _render(slot: tuple[str, str], obj: str) -> str:
    subject, template = slot
    return template.replace("[X]", subject).replace("__", obj)


def test_an_alfworld_chain_with_a_retraction_reinstates_the_earlier_location(store: pmem.Store) -> None:
    data = (b"Earlier observation: mug 1 was in cabinet 2.\n"
            b"Update: mug 1 has been moved from cabinet 2 to countertop 1.\n"
            b"Update: apple 2 has been moved from fridge 1 to sinkbasin 1.\n"
            b"The move of mug 1 to countertop 1 was reported in error.\n")
    receipts = list(Ingestor(store, TemplateExtractor()).run(read_records(data, "lines")))
    assert [(r["record"], r["op"], r["head"]["value"]) for r in receipts] == [
        (1, "accept", "cabinet 2"), (2, "accept", "countertop 1"), (3, "accept", "sinkbasin 1"),
        (4, "revoke", "cabinet 2")]
    versions = {v.value: v.status for v in store.history("mug_1.location").versions}
    assert versions == {"cabinet 2": "active", "countertop 1": "revoked"}
    assert store.get("mug_1.location", disclose=["support"]).to_dict()["support"]["sources"] == ["ingest:1"]


def test_statements_hedges_and_corrections_become_the_ops_the_annotator_chose(store: pmem.Store) -> None:
    data = (b"I think my dentist appointment is now Tuesday.\n"   # hedged on an empty cell: recorded noop
            b"My dentist appointment is now Monday.\n"
            b"Maybe my dentist appointment is now Wednesday.\n"   # contest
            b"My dentist appointment is now Monday.\n"            # support
            b"Correction: my dentist appointment is now Friday.\n"  # reject Monday
            b"My favourite colour is no longer blue.\n")          # revoke on an empty cell: recorded noop
    receipts = list(Ingestor(store, TemplateExtractor()).run(read_records(data, "lines")))
    assert [(r["requested"], r["op"], r["applied"]) for r in receipts] == [
        ("contest", "noop", False), ("accept", "accept", True), ("contest", "contest", True),
        ("support", "support", True), ("reject", "reject", True), ("revoke", "noop", False)]
    assert receipts[0]["reason"] == "contest needs an incumbent" and receipts[0]["assertion"] == "hedged"
    cell = store.get("dentist appointment")
    assert (cell.value, cell.status) == ("Friday", "active")
    statuses = {v.value: v.status for v in store.history("dentist_appointment").versions}
    assert statuses == {"Monday": "contradicted", "Wednesday": "superseded", "Friday": "active"}
    assert [e["op"] for e in store.log()] == ["noop", "accept", "contest", "support", "reject", "noop"]


@pytest.mark.parametrize("text", [
    "Update: cup 1 has been moved from shelf 1 to desk 1.",
    "The move of cup 1 to desk 1 was reported in error.",
    "The move of cup 1 to drawer 9 was reported in error.",
    "I think my cup is now in the sink.",
    "Correction: my cup is now desk 1.",
    "Correction: my cup is now shelf 4.",
])
@pytest.mark.parametrize("setup", [[], ["accept"], ["accept", "contest"]])
def test_the_annotators_validation_agrees_with_what_the_domain_records(store: pmem.Store, text: str,
                                                                       setup: list[str]) -> None:
    x = TemplateExtractor()
    (fact,) = x.extract(text, 1).facts
    for op, value in zip(setup, ["desk 1", "drawer 9"], strict=False):
        store.apply([{"op": op, "key": fact.key, "value": value}])
    view = store.get(fact.key)
    a = annotate(fact, CellSnapshot(view.value, view.status, view.alternatives))
    (receipt,) = store.apply([{"op": a.op, "key": fact.key, "value": fact.value}])
    assert receipt.applied == a.valid, (a, receipt)


def test_jsonl_records_bring_their_evidence_and_bad_records_are_reported_not_dropped(store: pmem.Store) -> None:
    data = (b'{"text": "My 5K PB is now 25:50.", "source": "race results", "trust": 80}\n'
            b'"My 5K PB is now 27:12."\n'
            b'{"text": "My 5K PB is now 24:00.", "trust": "high"}\n'
            b'{not json\n'
            b'{"message": "no text field"}\n')
    receipts = list(Ingestor(store, TemplateExtractor()).run(read_records(data, "jsonl")))
    assert [r["record"] for r in receipts] == [1, 2, 3, 4, 5]
    assert receipts[0]["op"] == "accept" and receipts[1]["op"] == "contest"  # trust 50 < 80: lowered
    assert receipts[2]["event_index"] is None and "trust" in receipts[2]["reason"]
    assert receipts[3]["reason"].startswith("malformed JSON") and "text" in receipts[4]["reason"]
    assert store.get("5k pb", disclose=["support"]).to_dict()["support"]["sources"] == ["race results"]


def test_the_llm_extractor_is_not_configured_and_unknown_names_are_bad_input() -> None:
    with pytest.raises(ExtractorNotConfigured, match="llm extractor not configured"):
        make_extractor("llm")
    with pytest.raises(InvalidOperation, match="unknown extractor"):
        make_extractor("regex")
    with pytest.raises(InvalidOperation, match="unknown format"):
        list(read_records(b"x", "csv"))


def test_records_keep_their_line_numbers_across_blank_lines() -> None:
    assert [(r.number, r.text) for r in read_records(b"a\n\nb\r\n", "lines")] == [(1, "a"), (3, "b")]
    assert list(read_records(b"\xff\n", "lines")) == [Record(1, None, problem="invalid UTF-8 at byte 0")]


def test_ingesting_a_stream_again_observes_it_again(store: pmem.Store) -> None:
    data = b"Earlier observation: mug 1 was in cabinet 2.\nUpdate: mug 1 has been moved from cabinet 2 to desk 1.\n"
    list(Ingestor(store, TemplateExtractor()).run(read_records(data, "lines")))
    again = list(Ingestor(store, TemplateExtractor()).run(read_records(data, "lines")))
    assert [(r["op"], r["head"]["value"]) for r in again] == [("accept", "cabinet 2"), ("accept", "desk 1")]
    assert [v.status for v in store.history("mug 1.location").versions] == [
        "superseded", "superseded", "superseded", "active"]


def test_jsonl_records_with_an_op_id_are_ingested_once(store: pmem.Store) -> None:
    data = (b'{"text": "My 5K PB is now 25:50.", "op_id": "watch-1"}\n'
            b'{"text": "My 5K PB is now 25:10.", "op_id": "watch-2"}\n')
    first = list(Ingestor(store, TemplateExtractor()).run(read_records(data, "jsonl")))
    last = store.last_index()
    again = list(Ingestor(store, TemplateExtractor()).run(read_records(data, "jsonl")))
    assert store.last_index() == last and all(r["duplicate"] for r in again)
    assert [(r["event_index"], r["op"], r["op_id"]) for r in again] == [
        (r["event_index"], r["op"], r["op_id"]) for r in first] == [(1, "accept", "watch-1"), (2, "accept", "watch-2")]


def test_receipts_come_in_input_order_even_around_records_without_facts(store: pmem.Store) -> None:
    data = b"My car is now blue.\nnothing to see\n\xff\nMy bike is now red.\nMy car is now green.\n"
    receipts = list(Ingestor(store, TemplateExtractor()).run(read_records(data, "lines")))
    assert [(r["record"], r["op"]) for r in receipts] == [
        (1, "accept"), (2, "noop"), (3, "noop"), (4, "accept"), (5, "accept")]
    assert [r["event_index"] for r in receipts] == [1, None, None, 2, 3]


def test_a_jsonl_confidence_below_the_threshold_contests_instead_of_superseding(store: pmem.Store) -> None:
    data = (b'{"text": "My flight is now at 9:00."}\n'
            b'{"text": "My flight is now at 7:30.", "confidence": 0.4}\n'
            b'{"text": "My flight is now at 8:15.", "confidence": 0.95}\n'
            b'{"text": "My flight is now at 6:00.", "confidence": "high"}\n')
    receipts = list(Ingestor(store, TemplateExtractor()).run(read_records(data, "jsonl")))
    assert [r["op"] for r in receipts] == ["accept", "contest", "accept", "noop"]
    assert "confidence 0.40" in receipts[1]["reason"] and "confidence" in receipts[3]["reason"]
    assert receipts[3]["event_index"] is None and store.get("flight").value == "at 8:15"


def test_an_open_alternative_can_be_withdrawn_in_the_same_stream(store: pmem.Store) -> None:
    data = b"My desk is now A.\nMaybe my desk is now B.\nMy desk is no longer B.\nMy desk is no longer C.\n"
    receipts = list(Ingestor(store, TemplateExtractor()).run(read_records(data, "lines")))
    assert [(r["op"], r["applied"]) for r in receipts] == [
        ("accept", True), ("contest", True), ("revoke", True), ("noop", False)]
    assert receipts[3]["reason"] == "revoke target not open"
    assert store.get("desk").status == "active"


def test_get_many_reads_what_get_reads(store: pmem.Store) -> None:
    store.apply([{"op": "accept", "key": "a", "value": "1"}, {"op": "accept", "key": "b", "value": "2"},
                 {"op": "contest", "key": "b", "value": "3"}, {"op": "contest", "key": "c", "value": "4"}])
    views = store.get_many(["a", "B", "c", "never"])
    assert set(views) == {"a", "b", "c", "never"}
    for key, view in views.items():
        assert view == store.get(key)
    assert (views["b"].status, views["b"].alternatives, views["never"].status) == ("contested", ("3",), "empty")
