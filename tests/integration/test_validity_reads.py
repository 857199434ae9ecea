"""What the validity benchmark measures, checked on the library directly: a cell read within a token budget
holds the current value of the asked slot and none of its superseded values, on interleaved revision chains
(ALFWorld's vocabulary) and on the FactConsolidation 6k stream and its single-hop questions (the copies in
tests/data, MIT: tests/data/README.md), with the real ONNX embedder."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import pmem
from pmem.adapters.embedders.cache import CachedEmbedder, MemoryEmbeddingCache
from pmem.adapters.embedders.onnx_embedder import OnnxEmbedder
from pmem.adapters.service.ingest import Ingestor, Record
from pmem.adapters.service.reader import Reader, TokenCounter
from pmem.domain.extraction.cloze import match_cloze
from pmem.domain.extraction.template import TemplateExtractor
from tests.conftest import ROOT

DATA = ROOT / "tests" / "data"
EMBEDDER = CachedEmbedder(OnnxEmbedder(), MemoryEmbeddingCache())  # loads on first use, shared by the module
BUDGET, K = 1024, 12


@pytest.fixture
def store(tmp_path: Path) -> Iterator[pmem.Store]:
    with pmem.open(tmp_path / "mem.db", embedder=EMBEDDER) as s:
        yield s


def ingest(store: pmem.Store, lines: list[str]) -> None:
    for _ in Ingestor(store, TemplateExtractor(), source="test").run(Record(i + 1, t) for i, t in enumerate(lines)):
        pass


def norm(text: str) -> str:
    """Lower-case words between single spaces, so that ``cabinet 2`` never matches inside ``cabinet 21``."""
    return " " + " ".join(re.findall(r"[a-z0-9]+", text.lower())) + " "


def naming(context: str, subject: str) -> list[str]:
    """The context's lines that name ``subject``."""
    return [line for line in context.splitlines() if norm(subject) in norm(line)]


def revision_chains(rng: random.Random, depth: int) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """Five objects each moved ``depth`` times, the moves of all five interleaved; each object with its stops."""
    vocab = json.loads((DATA / "alfworld" / "alfworld_vocab_from_constants.json").read_text())
    places = sorted({r.lower() for r in vocab["RECEPTACLES"]})
    objects = sorted({o.lower() for o in vocab["OBJECTS_SINGULAR"]} - set(places))
    chains, queues = [], []
    for obj in (f"{o} {rng.randint(1, 9)}" for o in rng.sample(objects, 5)):
        stops = [f"{p} {rng.randint(1, 9)}" for p in rng.sample(places, depth + 1)]
        chains.append((obj, stops))
        moves = [f"Update: {obj} has been moved from {a} to {b}." for a, b in zip(stops, stops[1:], strict=False)]
        queues.append([f"Earlier observation: {obj} was in {stops[0]}.", *moves])
    stream = []
    while any(queues):
        stream.append(rng.choice([q for q in queues if q]).pop(0))
    return stream, chains


@pytest.mark.parametrize("depth", [1, 4])
def test_a_cell_read_holds_each_objects_last_place_and_none_it_left(store: pmem.Store, depth: int) -> None:
    stream, chains = revision_chains(random.Random(depth), depth)
    ingest(store, stream)
    reader = Reader(store, counter=TokenCounter())
    for obj, stops in chains:
        assert store.get(f"{obj}.location".replace(" ", "_")).value == stops[-1]
        lines = naming(reader.read_cells(f"Where is {obj} now?", k=K, budget=BUDGET).context, obj)
        assert any(norm(stops[-1]) in norm(line) for line in lines), (obj, lines)
        assert not [s for s in stops[:-1] if any(norm(s) in norm(line) for line in lines)], (obj, lines)


def stale_values(facts: list[str]) -> dict[tuple[str, str], list[str]]:
    """(subject, relation) -> its values in stream order, from the cloze templates."""
    slots: dict[tuple[str, str], list[str]] = {}
    for fact in facts:
        if (m := match_cloze(fact.removesuffix("."))) is not None:
            cloze, subject, value = m
            slots.setdefault((subject, cloze.relation), []).append(value)
    return slots


def test_the_factconsolidation_single_hop_reads_hold_the_gold_value_without_stale_ones(store: pmem.Store) -> None:
    text = (DATA / "factconsolidation" / "factconsolidation_6k_context.txt").read_text()
    facts = [m.group(1) for m in re.finditer(r"^\d+\. (.*)$", text, re.M)]
    questions = [json.loads(line) for line in (DATA / "factconsolidation" / "questions_6k.jsonl").read_text()
                 .splitlines() if "_sh_" in line]
    ingest(store, facts)
    slots, reader = stale_values(facts), Reader(store, counter=TokenCounter())
    gold = stale = updated = 0
    for q in questions:
        context = reader.read_cells(q["question"], k=K, budget=BUDGET).context
        gold += any(norm(g) in norm(context) for g in q["answers"])
        # the slot asked: its subject is named and its last value is a gold answer
        asked = [(s, values) for (s, _), values in slots.items() if norm(s) in norm(q["question"])
                 and any(norm(values[-1]) == norm(g) for g in q["answers"]) and len(values) > 1]
        if asked:
            subject, values = max(asked, key=lambda a: len(a[0]))
            updated += 1
            stale += any(norm(v) in norm(line) for line in naming(context, subject) for v in values[:-1]
                         if all(norm(v) != norm(g) for g in q["answers"]))
    assert len(questions) == 40 and updated >= 10
    assert gold / len(questions) >= 0.95 and stale / updated <= 0.05, (gold, stale, updated)
