"""The embedder's int8-activation model form, derived from the packaged model with the real onnx and
onnxruntime, and cached (:mod:`pmem.adapters.embedders.derived_model`)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

from pmem.adapters.embedders.choice import EmbedderChoice
from pmem.adapters.embedders.derived_model import PINNED, sha256_of
from pmem.adapters.embedders.derived_model import derived_model as derive_cached
from pmem.adapters.embedders.onnx_embedder import MODEL_SHA256, OnnxEmbedder, installed_model_path
from pmem.domain.errors import EmbedderUnavailable

SOURCE = installed_model_path()


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache folder with the model derived into it once, for this module."""
    path = tmp_path_factory.mktemp("models")
    derive_cached(SOURCE, MODEL_SHA256, path)
    return path


def test_the_locked_releases_derive_the_pinned_model_and_cache_it_under_its_digests(folder: Path) -> None:
    (cached,) = folder.glob("*.onnx")
    assert cached.name == f"{MODEL_SHA256[:16]}-dq-{PINNED}.onnx"
    assert sha256_of(cached) == PINNED
    assert derive_cached(SOURCE, MODEL_SHA256, folder) == cached  # found again, not derived again


def test_a_damaged_cached_model_is_deleted_and_derived_again(folder: Path, tmp_path: Path) -> None:
    (good,) = folder.glob("*.onnx")
    damaged = tmp_path / good.name
    data = bytearray(good.read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged.write_bytes(bytes(data))
    left, running = tmp_path / ".deriving-killed", tmp_path / ".deriving-running"
    for path, age in ((left, 3600), (running, 5)):  # one a killed derivation left, one being written
        path.write_bytes(b"partial")
        os.utime(path, (time.time() - age, time.time() - age))
    again = derive_cached(SOURCE, MODEL_SHA256, tmp_path)
    assert again == damaged and sha256_of(again) == PINNED  # the same name, now with the right bytes
    assert sorted(p.name for p in tmp_path.iterdir()) == [running.name, good.name]  # nothing else left


def test_a_cache_folder_that_cannot_be_written_leaves_the_model_in_memory(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    held = derive_cached(SOURCE, MODEL_SHA256, blocker / "models")
    assert isinstance(held, bytes) and sha256_of(held) == PINNED


def test_the_embedder_runs_the_cached_form_and_onnx_fp32_the_packaged_one(folder: Path) -> None:
    names = [EmbedderChoice.parse(kind).build(None).name for kind in ("onnx", "onnx-fp32")]
    assert names == ["minilm-l6-v2-int8-dq", "minilm-l6-v2-int8"]
    dq, fp32 = OnnxEmbedder(model_cache=folder), OnnxEmbedder(dynamic=False, model_cache=folder)
    texts = ["home city: Porto", "5k_pb: 25:50", "favourite bird: eagle"]
    a, b = dq.embed(texts), fp32.embed(texts)
    assert not np.array_equal(a, b) and ((a * b).sum(axis=1) > 0.95).all()
    assert len(list(folder.glob("*.onnx"))) == 1  # the embedder found the derived model, made no other


def test_a_model_that_is_not_onnx_cannot_be_derived(tmp_path: Path) -> None:
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"not a model")
    embedder = OnnxEmbedder(model_path=bad, verify=False, model_cache=tmp_path / "models")
    with pytest.raises(EmbedderUnavailable, match="cannot derive"):
        embedder.embed(["hello"])
    assert not (tmp_path / "models").exists()
