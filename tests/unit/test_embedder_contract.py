"""The embedder contract (tests/embedder_contract.py) for the hashing embedder, bare and behind a memory cache."""

from __future__ import annotations

import pytest

from pmem.adapters.embedders.cache import CachedEmbedder, MemoryEmbeddingCache
from pmem.adapters.embedders.hashing_embedder import HashingEmbedder
from tests.embedder_contract import EmbedderContract


class TestHashingEmbedder(EmbedderContract):
    @pytest.fixture(params=[384, 64], ids=lambda d: f"dim{d}")
    def subject(self, request: pytest.FixtureRequest) -> HashingEmbedder:
        return HashingEmbedder(request.param)


class TestHashingEmbedderCachedInMemory(EmbedderContract):
    @pytest.fixture
    def subject(self) -> CachedEmbedder:
        return CachedEmbedder(HashingEmbedder(), MemoryEmbeddingCache())
