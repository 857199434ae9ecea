"""Soft key identity with the real ONNX embedder: calibration floor, merges as events, un-merge, receipts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import pmem
from pmem.adapters.embedders.cache import CachedEmbedder, MemoryEmbeddingCache
from pmem.adapters.embedders.onnx_embedder import OnnxEmbedder
from pmem.adapters.service.ingest import Ingestor
from pmem.adapters.service.soft_keys import DEFAULT_THRESHOLD, KeyIdentity, unmerge
from pmem.adapters.sources.records import read_records
from pmem.domain.extraction.key_identity import same_key, shortlist_phrase
from pmem.domain.extraction.template import TemplateExtractor

PAIRS = Path(__file__).resolve().parents[1] / "data" / "key_pairs.tsv"
PRECISION_FLOOR = 0.95
RECALL_FLOOR = 0.85


def labelled_pairs() -> list[tuple[str, str, bool]]:
    rows = [line.rstrip("\n").split("\t") for line in PAIRS.read_text().splitlines()
            if line.strip() and not line.startswith("#")]
    return [(a, b, y == "1") for a, b, y in rows]


@pytest.fixture(scope="module")
def embedder() -> Iterator[CachedEmbedder]:
    yield CachedEmbedder(OnnxEmbedder(), MemoryEmbeddingCache())


def test_the_calibration_set_merges_with_precision_above_the_floor(embedder: CachedEmbedder) -> None:
    pairs = labelled_pairs()
    a = embedder.embed([shortlist_phrase(x)[1] for x, _, _ in pairs])
    b = embedder.embed([shortlist_phrase(y)[1] for _, y, _ in pairs])
    cosine = (np.asarray(a) * np.asarray(b)).sum(axis=1)
    merged = [bool(c >= DEFAULT_THRESHOLD and same_key(x, y)[0]) for c, (x, y, _) in zip(cosine, pairs, strict=True)]
    tp = sum(m and y for m, (_, _, y) in zip(merged, pairs, strict=True))
    fp = sum(m and not y for m, (_, _, y) in zip(merged, pairs, strict=True))
    positives = sum(y for _, _, y in pairs)
    assert len(pairs) >= 60 and positives >= 30
    assert tp / max(1, tp + fp) >= PRECISION_FLOOR
    assert tp / positives >= RECALL_FLOOR


def ingest(store: pmem.Store, identity: KeyIdentity, text: str) -> list[dict[str, object]]:
    return list(Ingestor(store, TemplateExtractor(), identity=identity).run(read_records(text.encode(), "lines")))


def test_a_paraphrased_key_merges_into_the_registered_one_as_an_event(store: pmem.Store,
                                                                      embedder: CachedEmbedder) -> None:
    identity = KeyIdentity(store, embedder).load()
    first = ingest(store, identity, "My 5K PB is now 25:50.\nMy 10K PB is now 55:00.")
    assert [r["identity"] for r in first] == ["new", "new"]
    assert first[1]["candidates"][0]["key"] == "5k_pb"  # compared, below the check: not merged
    receipts = ingest(store, identity, "My personal best over 5 km is now 24:59.")
    merge, fact = receipts
    assert merge["key"] == "_alias.personal_best_over_5_km" and merge["op"] == "accept"
    assert fact["key"] == "5k_pb" and fact["identity"] == "merged"
    assert fact["extracted_key"] == "personal_best_over_5_km"
    assert fact["candidates"][0]["key"] == "5k_pb" and fact["candidates"][0]["score"] >= DEFAULT_THRESHOLD
    assert fact["conflict"] is True and fact["op"] == "accept"
    assert store.get("5k pb").value == "24:59" and store.get("personal best over 5 km").value is None
    alias_events = [e for e in store.log() if e["key"].startswith("_alias.")]
    assert len(alias_events) == 1 and "cosine" in alias_events[0]["text"]


def test_merges_survive_a_restart_and_unmerge_sends_later_facts_to_their_own_cell(
        db_path: Path, embedder: CachedEmbedder) -> None:
    with pmem.open(db_path) as store:
        identity = KeyIdentity(store, embedder).load()
        ingest(store, identity, "My home city is now Porto.\nMy hometown is now Lisbon.")
    with pmem.open(db_path) as store:
        reloaded = KeyIdentity(store, embedder).load()
        assert reloaded.aliases == {"hometown": "home_city"}
        routed = ingest(store, reloaded, "My hometown is now Braga.")
        assert routed[0]["identity"] == "alias" and routed[0]["key"] == "home_city"
        assert unmerge(store, "hometown").applied
    with pmem.open(db_path) as store:
        after = KeyIdentity(store, embedder).load()
        own = ingest(store, after, "My hometown is now Faro.")
        assert own[0]["key"] == "hometown" and own[0]["identity"] == "own"
        assert store.get("home city").value == "Braga" and store.get("hometown").value == "Faro"
        trail = [(e["op"], e["value"]) for e in store.log() if e["key"] == "_alias.hometown"]
        assert trail == [("accept", "home_city"), ("accept", "hometown")]  # merge, then un-merge: both kept


def test_near_misses_and_other_subjects_stay_separate(store: pmem.Store, embedder: CachedEmbedder) -> None:
    identity = KeyIdentity(store, embedder).load()
    receipts = ingest(store, identity, "\n".join([
        "The capital of France is Paris.", "The capital of Germany is Berlin.",
        "My marathon PB is now 3:30.", "My half marathon PB is now 1:40.",
    ]))
    assert [r["identity"] for r in receipts] == ["new"] * 4
    assert identity.merges == 0
