"""The embedder a store searches with when none is injected: the offline ONNX model behind a text cache.

The cache is :class:`pmem.adapters.embedders.cache.SqliteEmbeddingCache` in the store's own file, so a
text embedded once (by search, ingest or a rebuild of the vector index) is never run through the
model again, across processes and restarts. An in-memory store keeps its cache in memory.
Nothing here loads the model: :class:`pmem.adapters.embedders.onnx_embedder.OnnxEmbedder` loads on its first text.
Other choices (``hashing``, ``litellm:MODEL``) are built the same way by :mod:`pmem.adapters.embedders.choice`.
"""

from __future__ import annotations

from pathlib import Path

from pmem.adapters.embedders.cache import CachedEmbedder
from pmem.adapters.embedders.choice import EmbedderChoice


def default_embedder(path: Path | None) -> CachedEmbedder:
    """``OnnxEmbedder`` cached in the SQLite file ``path`` (None: an in-memory store, cached in memory)."""
    return EmbedderChoice("onnx").build(path)
