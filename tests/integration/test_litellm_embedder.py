"""The litellm embedder against a real OpenAI-compatible HTTP server on 127.0.0.1 (tests/embedding_server.py).

No network: the server is a thread of this process, answering ``POST /v1/embeddings`` with deterministic
vectors. The embedder contract runs against it bare and behind both text caches; the failures a real
server can produce (down, a body that is not JSON, a changed or wrong dimension, too few vectors, a 500)
each raise one line of the error tree.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import pmem
from pmem.adapters.embedders.cache import CachedEmbedder, MemoryEmbeddingCache, SqliteEmbeddingCache
from pmem.adapters.embedders.choice import EmbedderChoice
from pmem.adapters.embedders.litellm_embedder import LitellmEmbedder, LitellmEmbedderSettings
from pmem.domain.errors import EmbedderBadResponse, EmbedderUnavailable, InvalidOperation
from tests.conftest import ROOT
from tests.embedder_contract import EmbedderContract
from tests.embedding_server import EmbeddingServer, closed_port_base, embedding_server

DIM = 48


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddingServer]:
    with embedding_server(DIM) as s:
        yield s


def litellm_embedder(base: str, **settings: object) -> LitellmEmbedder:
    return LitellmEmbedder(LitellmEmbedderSettings("test-embed", base, **settings))  # type: ignore[arg-type]


class TestLitellmEmbedder(EmbedderContract):
    @pytest.fixture
    def subject(self, server: EmbeddingServer) -> LitellmEmbedder:
        return litellm_embedder(server.base, batch_size=3)


class TestLitellmCachedInMemory(EmbedderContract):
    @pytest.fixture
    def subject(self, server: EmbeddingServer) -> CachedEmbedder:
        return CachedEmbedder(litellm_embedder(server.base), MemoryEmbeddingCache())


class TestLitellmCachedInTheStoreFile(EmbedderContract):
    @pytest.fixture
    def subject(self, server: EmbeddingServer, db_path: Path) -> Iterator[CachedEmbedder]:
        embedder = EmbedderChoice.parse("litellm:test-embed", api_base=server.base).build(db_path)
        yield embedder
        embedder.cache.close()  # type: ignore[attr-defined]


def test_texts_go_to_the_server_in_batches_and_the_dimension_comes_from_its_first_answer() -> None:
    with embedding_server(DIM) as s:
        e = litellm_embedder(s.base, batch_size=4)
        v = e.embed([f"text {i}" for i in range(10)])
        assert [len(r) for r in s.requests] == [4, 4, 2] and e.calls == 3
        assert v.shape == (10, DIM) and e.dim == DIM and e.calls == 3  # dim needed no further request
        assert e.name == "litellm:openai/test-embed"


def test_reading_the_dimension_first_asks_the_server_once() -> None:
    with embedding_server(DIM) as s:
        e = litellm_embedder(s.base)
        assert e.dim == DIM and e.dim == DIM
        assert len(s.requests) == 1


def test_blank_texts_are_not_sent_and_embed_to_zero() -> None:
    with embedding_server(DIM) as s:
        v = litellm_embedder(s.base).embed(["", "home city: Paris", "  "])
        assert s.requests == [["home city: Paris"]]
        assert not v[0].any() and not v[2].any() and abs(np.linalg.norm(v[1]) - 1) < 1e-5


def test_a_text_in_the_cache_is_never_sent_again_even_after_a_restart(db_path: Path) -> None:
    with embedding_server(DIM) as s:
        cache = SqliteEmbeddingCache(db_path)
        first = CachedEmbedder(litellm_embedder(s.base), cache).embed(["alpha", "beta", "alpha"])
        cache.close()
        assert s.requests == [["alpha", "beta"]]
        reopened = SqliteEmbeddingCache(db_path)
        fresh = litellm_embedder(s.base, dim=DIM)  # a known dimension: nothing at all to ask
        again = CachedEmbedder(fresh, reopened).embed(["beta", "alpha"])
        reopened.close()
        assert np.array_equal(again, first[[1, 0]]) and fresh.calls == 0 and len(s.requests) == 1


def test_a_store_opened_with_the_litellm_setting_searches_through_the_server(db_path: Path) -> None:
    with embedding_server(DIM) as s, pmem.open(db_path, embedder="litellm:test-embed", embedder_base=s.base) as store:
        store.accept("home city", "Paris")
        store.accept("budget", "$30k")
        hits = store.search("home city", k=1)
        assert hits[0].cell.key == "home_city"
        assert store.embedder.name == "litellm:openai/test-embed"
        sent = [t for r in s.requests for t in r]
        assert "home city: Paris" in sent and "home city" in sent
        assert store.search("home city", k=1)[0].cell.key == "home_city"
        assert [t for r in s.requests for t in r] == sent  # the query and the versions came from the cache


def test_the_embedder_setting_comes_from_the_environment_when_not_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PMEM_EMBEDDER", "litellm:my-model")
    monkeypatch.setenv("PMEM_EMBED_BASE", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("PMEM_EMBED_BATCH", "7")
    assert EmbedderChoice.parse() == EmbedderChoice("litellm", "my-model", "http://127.0.0.1:9/v1", 7)
    monkeypatch.setenv("PMEM_EMBEDDER", "hashing")
    assert EmbedderChoice.parse().build(None).name == "hashing-v1-384"


@pytest.mark.parametrize("spec, match", [
    ("word2vec", "unknown embedder 'word2vec'"),
    ("litellm:", "names no model"),
])
def test_a_bad_embedder_setting_is_one_line_naming_it(spec: str, match: str, db_path: Path) -> None:
    with pytest.raises(InvalidOperation, match=match):
        pmem.open(db_path, embedder=spec)
    assert not db_path.exists()  # refused before the store file was created


def test_a_bad_batch_size_from_the_environment_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PMEM_EMBED_BATCH", "many")
    with pytest.raises(InvalidOperation, match="PMEM_EMBED_BATCH must be a positive integer, got 'many'"):
        EmbedderChoice.parse("litellm:m")


def test_the_api_key_is_read_from_the_environment_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PMEM_EMBED_KEY", "sk-test")
    e = litellm_embedder("http://127.0.0.1:9/v1")
    assert e._kwargs(["x"])["api_key"] == "sk-test"
    monkeypatch.delenv("PMEM_EMBED_KEY")
    assert e._kwargs(["x"])["api_key"] == "none"


# -- failures ------------------------------------------------------------------------------------
def test_a_server_that_is_down_is_one_line_naming_it() -> None:
    base = closed_port_base()
    with pytest.raises(EmbedderUnavailable, match="Connection error") as e:
        litellm_embedder(base).embed(["hello"])
    assert base in str(e.value) and "\n" not in str(e.value) and type(e.value) is EmbedderUnavailable


def test_a_body_that_is_not_json_is_a_bad_response() -> None:
    with embedding_server(DIM, "bad-json") as s, pytest.raises(EmbedderBadResponse, match="not JSON") as e:
        litellm_embedder(s.base).embed(["hello"])
    assert s.base in str(e.value) and "\n" not in str(e.value)


def test_a_dimension_that_changes_between_answers_is_a_bad_response() -> None:
    with embedding_server(DIM, "wrong-dim") as s:
        e = litellm_embedder(s.base)
        e.embed(["first"])
        with pytest.raises(EmbedderBadResponse, match=f"{DIM + 1}-dimensional vectors, expected {DIM} "
                                                      r"\(from its first response\)"):
            e.embed(["second"])


def test_a_dimension_other_than_the_configured_one_is_a_bad_response() -> None:
    with embedding_server(DIM) as s, pytest.raises(EmbedderBadResponse, match="expected 384 \\(the configured"):
        litellm_embedder(s.base, dim=384).embed(["hello"])


def test_too_few_vectors_is_a_bad_response() -> None:
    with embedding_server(DIM, "short") as s, pytest.raises(EmbedderBadResponse, match="returned 1 vectors for 2"):
        litellm_embedder(s.base).embed(["a", "b"])


def test_a_server_error_is_one_line_with_the_servers_message() -> None:
    with embedding_server(DIM, "error") as s, pytest.raises(EmbedderUnavailable, match="500 - model exploded"):
        litellm_embedder(s.base).embed(["a"])


def test_a_failed_batch_writes_nothing_to_the_cache(db_path: Path) -> None:
    with embedding_server(DIM, "wrong-dim") as s:
        cache = SqliteEmbeddingCache(db_path)
        cached = CachedEmbedder(litellm_embedder(s.base, batch_size=1), cache)
        with pytest.raises(EmbedderBadResponse):
            cached.embed(["one", "two"])
        assert len(cache) == 0
        cache.close()


def test_importing_the_litellm_embedder_does_not_import_litellm() -> None:
    code = ("import sys, pmem.adapters.embedders.litellm_embedder, pmem.adapters.embedders.choice\n"
            "import pmem.adapters.service.store\n"
            "assert 'litellm' not in sys.modules and 'openai' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
