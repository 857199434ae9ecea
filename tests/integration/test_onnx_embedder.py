"""The offline embedder with the real int8 MiniLM model, and its text-keyed cache (memory and SQLite).

The embedder contract (tests/embedder_contract.py) runs against the model and both caches."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import pmem
from pmem.adapters.embedders.cache import CachedEmbedder, MemoryEmbeddingCache, SqliteEmbeddingCache
from pmem.adapters.embedders.onnx_embedder import (
    TOKENIZER_PATH,
    TOKENIZER_SHA256,
    OnnxEmbedder,
    installed_model_path,
    token_batches,
)
from pmem.domain.errors import EmbedderUnavailable
from tests.embedder_contract import PARAPHRASES, EmbedderContract

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def embedder() -> Iterator[OnnxEmbedder]:
    yield OnnxEmbedder()


@pytest.fixture(scope="module")
def packaged() -> Iterator[OnnxEmbedder]:
    """The packaged model as it is (float32 products), which batches texts."""
    yield OnnxEmbedder(dynamic=False)


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b))


class TestOnnxEmbedder(EmbedderContract):
    @pytest.fixture
    def subject(self, embedder: OnnxEmbedder) -> OnnxEmbedder:
        return embedder

    def test_it_is_minilm_int8_with_384_dimensions(self, embedder: OnnxEmbedder) -> None:
        assert (embedder.name, embedder.dim) == ("minilm-l6-v2-int8-dq", 384)
        assert (OnnxEmbedder(dynamic=False).name, embedder.dynamic) == ("minilm-l6-v2-int8", True)


class TestOnnxEmbedderPackagedForm(EmbedderContract):
    @pytest.fixture
    def subject(self, packaged: OnnxEmbedder) -> OnnxEmbedder:
        return packaged


class TestCachedInMemory(EmbedderContract):
    @pytest.fixture
    def subject(self, embedder: OnnxEmbedder) -> CachedEmbedder:
        return CachedEmbedder(embedder, MemoryEmbeddingCache())


class TestCachedInTheStoreFile(EmbedderContract):
    @pytest.fixture
    def subject(self, embedder: OnnxEmbedder, db_path: Path) -> Iterator[CachedEmbedder]:
        cache = SqliteEmbeddingCache(db_path)
        yield CachedEmbedder(embedder, cache)
        cache.close()


def test_paraphrases_are_closer_than_unrelated_pairs(embedder: OnnxEmbedder) -> None:
    left = embedder.embed([a for a, _ in PARAPHRASES])
    right = embedder.embed([b for _, b in PARAPHRASES])
    for i in range(len(PARAPHRASES)):
        same = cos(left[i], right[i])
        for j in range(len(PARAPHRASES)):
            if j != i:
                assert same > cos(left[i], right[j]) + 0.2, (PARAPHRASES[i], PARAPHRASES[j])
        assert same > 0.6


def test_a_text_embeds_the_same_alone_and_inside_a_batch_of_several_model_runs(packaged: OnnxEmbedder) -> None:
    texts = [f"observation {i}: the key number {i} now holds value {i * 7}" for i in range(150)]
    runs = packaged.runs
    together = packaged.embed(texts)
    lengths = [len(e.ids) for e in packaged._tokenizer.encode_batch(texts)]
    assert packaged.runs - runs == len(token_batches(lengths, 64, 512)) > 3  # ~17 tokens: ~30 a run, not 64
    for i in (0, 63, 64, 149):
        alone = packaged.embed([texts[i]])[0]
        assert cos(alone, together[i]) > 0.999


def test_int8_activations_run_each_text_alone_so_its_vector_is_its_own(embedder: OnnxEmbedder,
                                                                        packaged: OnnxEmbedder) -> None:
    """Each run's activations are scaled to that run's range: a text run with others (and their padding)
    would get another vector. So each text runs alone, and comes out the same whatever it is embedded
    with; and close to the packaged form's vector (the int8 rounding)."""
    texts = [f"subject_{i}.capital: Object {i * 7919 % 1000}" + " long" * (i % 9) for i in range(40)]
    runs = embedder.runs
    together = embedder.embed(texts)
    assert embedder.runs - runs == len(texts)
    assert np.array_equal(embedder.embed(texts[::-1])[::-1], together)
    assert np.array_equal(embedder.embed([texts[7]])[0], together[7])
    close = (together * packaged.embed(texts)).sum(axis=1)
    assert close.min() > 0.95 and close.mean() > 0.98


def test_batches_run_at_once_give_the_rows_of_batches_run_one_by_one(embedder: OnnxEmbedder) -> None:
    """The default runs two batches at once (the thread settings measured fastest): same rows, same order,
    every run counted, as one batch at a time on onnxruntime's own thread settings."""
    texts = [f"subject_{i}.capital: Object {i * 7919 % 1000}" + " long" * (i % 9) for i in range(300)]
    for model in (embedder, OnnxEmbedder(dynamic=False)):
        assert model.parallel == 2 and model.threads == 1
        serial = OnnxEmbedder(threads=0, parallel=1, spinning=True, dynamic=model.dynamic)
        runs = model.runs
        together = model.embed(texts)
        lengths = [len(e.ids) for e in model._tokenizer.encode_batch(texts)]
        assert model.runs - runs == len(token_batches(lengths, model.batch_size, model.token_budget)) > 1
        assert np.allclose(together, serial.embed(texts), atol=1e-5)


def test_a_batch_cut_by_tokens_embeds_as_one_text_at_a_time(embedder: OnnxEmbedder) -> None:
    """Texts of very different lengths: each batch is padded to its own longest, which must not change a vector."""
    texts = ["a", "short one", " ".join(["word"] * 300), "a sentence of a middling length, with a clause", "b" * 40]
    budgeted = OnnxEmbedder(token_budget=16, dynamic=False)
    together = budgeted.embed(texts)
    assert budgeted.runs >= 3
    for i, t in enumerate(texts):
        assert cos(budgeted.embed([t])[0], together[i]) > 0.9999


def test_no_texts_give_an_empty_matrix_without_running_the_model() -> None:
    e = OnnxEmbedder()
    assert e.embed([]).shape == (0, 384)
    assert e.runs == 0 and e.load_seconds is None
    with pytest.raises(TypeError):
        e.embed("one string")  # type: ignore[arg-type]


def test_the_model_comes_from_the_installed_package_and_the_tokenizer_from_our_package_data() -> None:
    assert installed_model_path().is_file()
    assert TOKENIZER_PATH.is_relative_to(ROOT / "adapters")
    import hashlib

    assert hashlib.sha256(TOKENIZER_PATH.read_bytes()).hexdigest() == TOKENIZER_SHA256
    assert TOKENIZER_PATH.stat().st_size == 466_247
    assert (TOKENIZER_PATH.parent / "NOTICE").read_text().count("Apache") >= 1


def test_a_tampered_tokenizer_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "tokenizer.json"
    bad.write_bytes(TOKENIZER_PATH.read_bytes().replace(b"[UNK]", b"[UNX]", 1))
    with pytest.raises(EmbedderUnavailable, match="sha256"):
        OnnxEmbedder(tokenizer_path=bad).embed(["hello"])
    with pytest.raises(EmbedderUnavailable, match="not found"):
        OnnxEmbedder(model_path=tmp_path / "missing.onnx").embed(["hello"])


def test_importing_the_embedder_does_not_import_onnxruntime_or_tokenizers() -> None:
    code = ("import sys, pmem.adapters.embedders.onnx_embedder, pmem.adapters.embedders.cache; "
            "assert not {'onnxruntime', 'tokenizers'} & set(sys.modules), sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_a_cached_text_never_runs_the_model_again(embedder: OnnxEmbedder) -> None:
    cached = CachedEmbedder(embedder, MemoryEmbeddingCache())
    first = cached.embed(["alpha beta", "gamma delta", "alpha beta"])
    runs, texts = embedder.runs, embedder.texts
    again = cached.embed(["gamma delta", "alpha beta"])
    assert (embedder.runs, embedder.texts) == (runs, texts)
    assert np.array_equal(again, first[[1, 0]])
    assert (cached.name, cached.dim, cached.misses, cached.hits) == (embedder.name, 384, 2, 3)
    cached.embed(["alpha beta", "epsilon"])
    assert embedder.texts == texts + 1  # only the new text was embedded


def test_the_sqlite_cache_lives_in_the_store_file_and_survives_a_restart(db_path: Path,
                                                                         embedder: OnnxEmbedder) -> None:
    with pmem.open(db_path) as store:
        store.accept("home city", "Lisbon")
    cache = SqliteEmbeddingCache(db_path)
    vectors = CachedEmbedder(embedder, cache).embed(["home city: Lisbon", "pet: a cat"])
    cache.close()

    fresh = OnnxEmbedder()  # never loaded: any model run would show in its counters
    reopened = SqliteEmbeddingCache(db_path)
    again = CachedEmbedder(fresh, reopened).embed(["pet: a cat", "home city: Lisbon"])
    assert fresh.runs == 0 and fresh.load_seconds is None
    assert np.array_equal(again, vectors[[1, 0]]) and len(reopened) == 2
    reopened.close()
    with pmem.open(db_path) as store:
        assert store.get("home city").value == "Lisbon"


def test_the_built_wheel_carries_the_tokenizer_as_package_data(tmp_path: Path) -> None:
    import zipfile

    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "--disable-pip-version-check", str(ROOT), "-w", str(tmp_path)],
                   check=True, cwd=tmp_path, capture_output=True)
    (wheel,) = tmp_path.glob("pmem-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "pmem/adapters/embedders/data/all-MiniLM-L6-v2/tokenizer.json" in names
    assert "pmem/adapters/embedders/data/all-MiniLM-L6-v2/NOTICE" in names
    # One import name: nothing installs as a top-level domain, projections or adapters package.
    name, version = wheel.name.split("-")[:2]
    assert {n.split("/")[0] for n in names} == {"pmem", f"{name}-{version}.dist-info"}
    sources = {f"pmem/{layer}/{p.relative_to(ROOT / layer).as_posix()}" for layer in ("domain", "projections",
               "adapters") for p in (ROOT / layer).rglob("*.py")}
    assert sources and sources <= set(names), sorted(sources - set(names))
