"""Soft key identity with the real ONNX embedder: calibration floor, the safety set, merges as events,
un-merge, receipts, and the default (on for statement keys, exact identity for template relations)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import pmem
from pmem.adapters.embedders.cache import CachedEmbedder, MemoryEmbeddingCache
from pmem.adapters.embedders.onnx_embedder import OnnxEmbedder
from pmem.adapters.service.ingest import Ingestor, make_identity
from pmem.adapters.service.soft_keys import DEFAULT_THRESHOLD, KeyIdentity, unmerge
from pmem.adapters.sources.records import read_records
from pmem.domain.extraction.key_identity import same_key, shortlist_phrase
from pmem.domain.extraction.template import TemplateExtractor

PAIRS = Path(__file__).resolve().parents[1] / "data" / "key_pairs.tsv"
SAFETY_PAIRS = Path(__file__).resolve().parents[1] / "data" / "key_pairs_safety.tsv"
PRECISION_FLOOR = 0.95
RECALL_FLOOR = 0.85
SAFETY_RECALL_FLOOR = 0.80


def labelled_pairs(path: Path = PAIRS) -> list[tuple[str, str, bool]]:
    rows = [line.rstrip("\n").split("\t") for line in path.read_text().splitlines()
            if line.strip() and not line.startswith("#")]
    return [(a, b, y == "1") for a, b, y in rows]


def merged_by_default(pairs: list[tuple[str, str, bool]], embedder: CachedEmbedder) -> list[bool]:
    """What ingest does with no model configured: same subject, cosine >= the default threshold, then the rules."""
    a = embedder.embed([shortlist_phrase(x)[1] for x, _, _ in pairs])
    b = embedder.embed([shortlist_phrase(y)[1] for _, y, _ in pairs])
    cosine = (np.asarray(a) * np.asarray(b)).sum(axis=1)
    return [bool(c >= DEFAULT_THRESHOLD and shortlist_phrase(x)[0] == shortlist_phrase(y)[0] and same_key(x, y)[0])
            for c, (x, y, _) in zip(cosine, pairs, strict=True)]


@pytest.fixture(scope="module")
def embedder() -> Iterator[CachedEmbedder]:
    yield CachedEmbedder(OnnxEmbedder(), MemoryEmbeddingCache())


def test_the_calibration_set_merges_with_precision_above_the_floor(embedder: CachedEmbedder) -> None:
    pairs = labelled_pairs()
    merged = merged_by_default(pairs, embedder)
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


def test_the_safety_set_merges_no_near_miss_and_at_least_80_percent_of_paraphrases(embedder: CachedEmbedder) -> None:
    pairs = labelled_pairs(SAFETY_PAIRS)
    positives = sum(y for _, _, y in pairs)
    assert len(pairs) >= 60 and positives >= 30 and len(pairs) - positives >= 30
    merged = merged_by_default(pairs, embedder)
    wrong = [(x, y) for m, (x, y, same) in zip(merged, pairs, strict=True) if m and not same]
    assert wrong == []  # no near miss merged: possessive chains, qualifiers, relatives, numbers
    assert sum(m and same for m, (_, _, same) in zip(merged, pairs, strict=True)) / positives >= SAFETY_RECALL_FLOOR


def test_by_default_a_restated_statement_merges_while_template_relations_keep_exact_identity(
        store: pmem.Store) -> None:
    identity = make_identity(store, "auto", "template", None, DEFAULT_THRESHOLD)
    assert identity is not None
    text = "\n".join(["My favorite color is now teal.", "The capital of France is Paris.",
                      "My favourite colour is now navy.", "The capital of Germany is Berlin.",
                      "My manager is now Dana.", "My manager's manager is now Lee."])
    receipts = ingest(store, identity, text)
    by_key = [(r["key"], r.get("identity")) for r in receipts]
    assert by_key == [("favorite_color", "new"), ("france.capital", None), ("_alias.favourite_colour", "merge"),
                      ("favorite_color", "merged"), ("germany.capital", None), ("manager", "new"),
                      ("manager_s_manager", "new")]
    merge, merged = receipts[2], receipts[3]
    assert merge["reason"] == "merged into favorite_color: cosine 1.00, identical after normalisation and synonyms"
    assert merged["identity_reason"] == merge["reason"] and merged["extracted_key"] == "favourite_colour"
    refused = receipts[6]
    assert refused["candidates"][0]["key"] == "manager" and refused["candidates"][0]["score"] >= DEFAULT_THRESHOLD
    assert refused["identity_reason"].startswith("not merged into manager: cosine ")
    assert refused["identity_reason"].endswith("manager_s_manager qualifies manager (possessive chain: manager)")
    assert store.get("favorite color").value == "navy" and store.get("manager").value == "Dana"
    assert store.get("manager's manager").value == "Lee"
    assert [c.key for c in store.frontier()] == ["favorite_color", "france.capital", "germany.capital", "manager",
                                                "manager_s_manager"]


def test_soft_keys_off_and_on_and_the_llm_extractor_choose_the_scope(store: pmem.Store) -> None:
    assert make_identity(store, "off", "template", None, DEFAULT_THRESHOLD) is None
    on = make_identity(store, "on", "template", None, DEFAULT_THRESHOLD)
    auto = make_identity(store, "auto", "template", None, DEFAULT_THRESHOLD)
    auto_llm = make_identity(store, "auto", "llm", None, DEFAULT_THRESHOLD)
    assert on is not None and on.covers("cloze:P36") and on.covers("statement")
    assert auto is not None and not auto.covers("cloze:P36") and not auto.covers("alfworld.move")
    assert auto.covers("statement") and auto_llm is not None and auto_llm.covers("llm")


def test_the_rules_bind_a_judge_that_would_merge_anything(store: pmem.Store, embedder: CachedEmbedder) -> None:
    identity = KeyIdentity(store, embedder, judge=lambda a, b: (True, "always")).load()
    receipts = ingest(store, identity, "My morning run is now 5 km.\nMy evening run is now 3 km.")
    assert [r["identity"] for r in receipts] == ["new", "new"]
    assert "contrastive qualifier (evening / morning)" in receipts[1]["identity_reason"]
