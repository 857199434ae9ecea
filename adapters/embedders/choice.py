"""Choosing the embedder a store searches with, from a setting: ``onnx``, ``onnx-fp32``, ``hashing`` or
``litellm:MODEL``.

    onnx                 the offline all-MiniLM-L6-v2 int8 model, int8 activations too (the default)
    onnx-fp32            the same model with float32 products (the vectors of stores indexed before
                         the default's int8 activations)
    hashing              the deterministic feature-hashing embedder (no model; matches words, not meaning)
    litellm:MODEL        any OpenAI-compatible embedding server through litellm, e.g.
                         litellm:openai/Qwen3-Embedding-0.6B with api_base http://127.0.0.1:8000/v1

Unset settings come from the environment: ``PMEM_EMBEDDER`` (the choice), ``PMEM_EMBED_BASE`` (the
server URL), ``PMEM_EMBED_BATCH`` (texts per request) and ``PMEM_EMBED_KEY`` (the API key, only ever
read from the environment). Whatever is chosen sits behind the text cache of
:mod:`pmem.adapters.embedders.cache` in the store's own SQLite file, keyed by the embedder's name, so a text
is embedded once per model. Nothing here imports a model library.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pmem.domain.errors import InvalidOperation

if TYPE_CHECKING:  # numpy comes with the cache: a store imports this module, a read command no numpy
    from pmem.adapters.embedders.cache import CachedEmbedder

KINDS = ("onnx", "onnx-fp32", "hashing", "litellm")
LITELLM_PREFIX = "litellm:"


@dataclass(frozen=True)
class EmbedderChoice:
    """A parsed embedder setting (a typed command object for the composition root)."""

    kind: str = "onnx"
    model: str | None = None  # litellm only
    api_base: str | None = None  # litellm only
    batch_size: int = 64  # litellm only: texts per request

    @classmethod
    def parse(cls, spec: str | None = None, *, api_base: str | None = None, batch_size: int | None = None,
              field: str = "embedder") -> EmbedderChoice:
        """``spec`` (else ``PMEM_EMBEDDER``, else ``onnx``); ``api_base`` and ``batch_size`` fall back to
        ``PMEM_EMBED_BASE`` and ``PMEM_EMBED_BATCH``. A bad setting raises one line naming it."""
        raw = spec if spec is not None else os.environ.get("PMEM_EMBEDDER") or "onnx"
        text = raw.strip()
        if text in ("onnx", "onnx-fp32", "hashing"):
            return cls(text)
        if not text.startswith(LITELLM_PREFIX):
            raise InvalidOperation(f"unknown embedder {raw!r} (expected onnx, onnx-fp32, hashing or litellm:MODEL)",
                                   field=field)
        model = text[len(LITELLM_PREFIX):].strip()
        if not model:
            raise InvalidOperation(f"embedder {raw!r} names no model (e.g. litellm:openai/Qwen3-Embedding-0.6B)",
                                   field=field)
        base = api_base or os.environ.get("PMEM_EMBED_BASE") or None
        return cls("litellm", model, base, _batch_size(batch_size))

    def build(self, path: Path | None) -> CachedEmbedder:
        """The embedder behind a text cache in the SQLite file ``path`` (None: cached in memory)."""
        from pmem.adapters.embedders.cache import CachedEmbedder, MemoryEmbeddingCache, SqliteEmbeddingCache

        inner: Any
        if self.kind in ("onnx", "onnx-fp32"):
            from pmem.adapters.embedders.onnx_embedder import OnnxEmbedder

            inner = OnnxEmbedder(dynamic=self.kind == "onnx")
        elif self.kind == "hashing":
            from pmem.adapters.embedders.hashing_embedder import HashingEmbedder

            inner = HashingEmbedder()
        else:
            from pmem.adapters.embedders.litellm_embedder import LitellmEmbedder, LitellmEmbedderSettings

            assert self.model is not None
            inner = LitellmEmbedder(LitellmEmbedderSettings(self.model, self.api_base, batch_size=self.batch_size))
        cache = MemoryEmbeddingCache() if path is None else SqliteEmbeddingCache(path)
        return CachedEmbedder(inner, cache)


def _batch_size(given: int | None) -> int:
    if given is not None:
        raw: Any = given
    else:
        raw = os.environ.get("PMEM_EMBED_BATCH", "64")
        try:
            raw = int(raw)
        except ValueError:
            raise InvalidOperation(f"PMEM_EMBED_BATCH must be a positive integer, got {raw!r}",
                                   field="embed-batch") from None
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
        raise InvalidOperation(f"embedder batch size must be a positive integer, got {raw!r}", field="embed-batch")
    return raw
