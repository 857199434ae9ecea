"""The Embedder port's contract (run against every implementation) and the pure vector fold."""

from __future__ import annotations

from uuid import uuid4

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pmem.adapters.embedders.hashing_embedder import HashingEmbedder
from pmem.adapters.embedders.onnx_embedder import token_batches
from pmem.domain.cell import Accepted, CellEvent, Contested
from pmem.projections.ports import Embedder
from pmem.projections.vectors import VectorFold, version_text

EMBEDDERS = [HashingEmbedder(), HashingEmbedder(dim=64)]


@pytest.mark.parametrize("embedder", EMBEDDERS, ids=lambda e: e.name)
def test_an_embedder_gives_unit_float32_rows_of_its_dimension(embedder: Embedder) -> None:
    v = embedder.embed(["5k pb: 25:50", "home city: Paris", "Ünïcode wörds: ok"])
    assert v.shape == (3, embedder.dim) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-6)
    assert embedder.embed([]).shape == (0, embedder.dim)


@pytest.mark.parametrize("embedder", EMBEDDERS, ids=lambda e: e.name)
def test_an_embedder_is_deterministic_and_ranks_shared_words_higher(embedder: Embedder) -> None:
    a, b = embedder.embed(["budget: $30k"]), embedder.embed(["budget: $30k"])
    assert np.array_equal(a, b)
    q, near, far = embedder.embed(["what is the budget", "budget: $30k", "home city: Paris"])
    assert q @ near > q @ far


def test_the_hashing_embedder_maps_a_text_without_words_to_zero() -> None:
    assert not HashingEmbedder().embed(["  --  "]).any()


def test_the_embedded_string_is_key_colon_value_with_underscores_as_spaces() -> None:
    assert version_text("5k_pb", "25:50") == "5k pb: 25:50"
    assert version_text("user.home_city", "Paris") == "user.home city: Paris"


def event(cls: type[CellEvent], cid: object, version: int, value: str, **extra: object) -> CellEvent:
    fields = {"originator_id": cid, "originator_version": version, "timestamp": None, "namespace": "default",
              "key": "k", "requested": cls.OP, "reason": None, "text": None, "source": None, "trust": 50,
              "observed_at": None, "op_id": None, "value": value, **extra}
    e = object.__new__(cls)
    object.__setattr__(e, "__dict__", fields)
    return e


def test_the_fold_numbers_new_versions_in_event_order_and_tracks_their_intervals() -> None:
    c1, c2 = uuid4(), uuid4()
    f = VectorFold({}, next_id=7)
    f.apply(1, event(Accepted, c1, 1, "a", vid=0, supersedes=None))
    f.apply(2, event(Accepted, c2, 1, "x", vid=0, supersedes=None))
    f.apply(3, event(Contested, c1, 2, "b", vid=1, alternative_of=0))
    f.apply(4, event(Accepted, c1, 3, "c", vid=2, supersedes=0))
    assert [(n.vector_id, n.cell, n.vid, n.text) for n in f.new] == [
        (7, c1, 0, "k: a"), (8, c2, 0, "k: x"), (9, c1, 1, "k: b"), (10, c1, 2, "k: c")]
    assert f.spans(c1) == {0: [(1, 4)], 1: [(3, 4)], 2: [(4, None)]}
    assert f.touched == {c1, c2}


@given(st.lists(st.integers(1, 300), max_size=200), st.integers(1, 70), st.integers(1, 2048))
def test_token_batches_cover_every_text_once_within_the_caps(lengths: list[int], most: int, budget: int) -> None:
    batches = token_batches(lengths, most, budget)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    order = [lengths[i] for b in batches for i in b]
    assert order == sorted(order)  # shortest first: a batch's padding is to texts of about its own length
    for b in batches:
        longest = max(lengths[i] for i in b)
        assert len(b) <= most and (len(b) * longest <= budget or len(b) == 1)


def test_token_batches_cut_short_texts_into_fewer_runs_than_long_ones() -> None:
    assert [len(b) for b in token_batches([10] * 100, 64, 512)] == [51, 49]
    assert [len(b) for b in token_batches([10] * 100, 32, 512)] == [32, 32, 32, 4]
    assert token_batches([600, 5], 64, 512) == [[1], [0]]  # longer than the budget: alone
