"""Embeddings from any OpenAI-compatible server through litellm (e.g. vLLM serving Qwen3-Embedding).

litellm is imported on the first call, never at module import (the CLI must start fast). Texts go in
batches of ``batch_size`` per request; the vector dimension is taken from the first response (or
asked for by embedding one probe text when ``dim`` is read first), and every later response must
match it. Rows are L2-normalised here, since servers differ on whether they normalise. A text with
nothing but whitespace is not sent (OpenAI-compatible servers refuse empty input): it embeds to the
zero vector, which scores 0 against everything.

Failures are translated into the error tree: a server that cannot be reached or refuses the request
raises :class:`EmbedderUnavailable`; an answer that is not a usable list of vectors (bad JSON, wrong
count, wrong or ragged dimension, non-numbers) raises :class:`EmbedderBadResponse`. Both carry one
line naming the model and the server.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pmem.domain.errors import EmbedderBadResponse, EmbedderUnavailable, InvalidOperation

PROBE_TEXT = "dimension probe"
KEY_ENV = "PMEM_EMBED_KEY"


@dataclass(frozen=True)
class LitellmEmbedderSettings:
    """Which embedding model to ask and how. The API key is read from the environment (``key_env``)."""

    model: str
    api_base: str | None = None
    key_env: str = KEY_ENV
    batch_size: int = 64
    timeout_s: float = 60.0
    dim: int | None = None  # the expected dimension; None: whatever the first response has

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise InvalidOperation("litellm embedder: no model given (e.g. openai/Qwen3-Embedding-0.6B)", field="model")
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise InvalidOperation("litellm embedder: batch size must be a positive integer, "
                                   f"got {self.batch_size!r}", field="batch_size")
        if self.dim is not None and (isinstance(self.dim, bool) or not isinstance(self.dim, int) or self.dim < 1):
            raise InvalidOperation(f"litellm embedder: dim must be a positive integer, got {self.dim!r}", field="dim")

    @property
    def litellm_model(self) -> str:
        """The model string litellm gets: a bare alias on an OpenAI-compatible server becomes ``openai/<alias>``."""
        m = self.model.strip()
        return f"openai/{m}" if self.api_base and "/" not in m else m

    @property
    def where(self) -> str:
        """The model and server, for error messages."""
        return f"{self.litellm_model} at {self.api_base}" if self.api_base else self.litellm_model


class LitellmEmbedder:
    """The ``Embedder`` port over ``litellm.embedding``. ``calls`` counts answered requests, ``texts`` the
    texts they carried (tests read them to see batching and caching)."""

    def __init__(self, settings: LitellmEmbedderSettings) -> None:
        self.settings = settings
        self._dim = settings.dim
        self._dim_seen = False  # whether a response has fixed the dimension (a configured one is checked)
        self.calls = 0
        self.texts = 0
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """Names the vectors: a cache or index built by another model is never mixed with these."""
        return f"litellm:{self.settings.litellm_model}"

    @property
    def dim(self) -> int:
        """The configured dimension, else the first response's (embeds a probe text if none came yet)."""
        if self._dim is None:
            self.embed([PROBE_TEXT])
        assert self._dim is not None
        return self._dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text, in order (zero rows for blank texts)."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one string")
        texts = list(texts)
        send = [i for i, t in enumerate(texts) if t.strip()]
        rows: list[np.ndarray] = []
        for start in range(0, len(send), self.settings.batch_size):
            rows.append(self._request([texts[i] for i in send[start:start + self.settings.batch_size]]))
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if send:
            out[send] = np.concatenate(rows)
        return out

    def _request(self, batch: list[str]) -> np.ndarray:
        s = self.settings
        litellm = _litellm()  # outside the try: a missing `llm` extra is its own error, not a server failure
        try:
            response = litellm.embedding(**self._kwargs(batch))
        except Exception as e:  # noqa: BLE001 - litellm raises many types; each becomes one line of ours
            raise _translate(e, s) from e
        with self._lock:
            self.calls += 1
            self.texts += len(batch)
        vectors = _vectors(response, len(batch), s)
        with self._lock:
            if not self._dim_seen:
                if self._dim is not None and vectors.shape[1] != self._dim:
                    raise EmbedderBadResponse(f"embedding server {s.where} returned {vectors.shape[1]}-dimensional "
                                              f"vectors, expected {self._dim} (the configured dim)")
                self._dim, self._dim_seen = vectors.shape[1], True
            elif vectors.shape[1] != self._dim:
                raise EmbedderBadResponse(f"embedding server {s.where} returned {vectors.shape[1]}-dimensional "
                                          f"vectors, expected {self._dim} (from its first response)")
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        if not np.all(norms > 0):
            raise EmbedderBadResponse(f"embedding server {s.where} returned a zero vector for a non-empty text")
        unit: np.ndarray = (vectors / norms).astype(np.float32)
        return unit

    def _kwargs(self, batch: list[str]) -> dict[str, Any]:
        s = self.settings
        kwargs: dict[str, Any] = {"model": s.litellm_model, "input": batch, "timeout": s.timeout_s,
                                  "encoding_format": "float",
                                  # the OpenAI client's own retries, with backoff, on connection errors and 5xx
                                  # (litellm 1.110.2 reads 0 as its default, so 0 cannot turn them off)
                                  "max_retries": 2}
        key = os.environ.get(s.key_env)
        if s.api_base:
            kwargs["api_base"] = s.api_base
            kwargs["api_key"] = key or "none"  # a local server needs no key, but the client wants one
        elif key:
            kwargs["api_key"] = key
        return kwargs


def _litellm() -> Any:
    """litellm, imported on first use, told not to fetch its model price map from the network; without
    the ``llm`` extra, :class:`MissingExtra` naming it."""
    from pmem.adapters.llm.client import _litellm as load

    return load()


def _vectors(response: Any, count: int, s: LitellmEmbedderSettings) -> np.ndarray:
    """The response's vectors as a ``(count, dim)`` float64 array, in input order, or a bad-response error."""
    data = getattr(response, "data", None)
    if data is None and isinstance(response, dict):
        data = response.get("data")
    if not isinstance(data, list) or len(data) != count:
        got = len(data) if isinstance(data, list) else type(data).__name__
        raise EmbedderBadResponse(f"embedding server {s.where} returned {got} vectors for {count} texts")
    items = [item if isinstance(item, dict) else getattr(item, "__dict__", {}) for item in data]
    order = [item.get("index", i) for i, item in enumerate(items)]
    if sorted(o for o in order if isinstance(o, int)) != list(range(count)):
        raise EmbedderBadResponse(f"embedding server {s.where} returned vector indexes {order[:5]}..., "
                                  f"not 0..{count - 1}")
    rows: list[Any] = [None] * count
    for i, item in zip(order, items, strict=True):
        rows[i] = item.get("embedding")
    if not all(isinstance(r, list) and r for r in rows):
        raise EmbedderBadResponse(f"embedding server {s.where} returned an item without a list of numbers "
                                  "as its 'embedding'")
    dims = {len(r) for r in rows}
    if len(dims) != 1:
        raise EmbedderBadResponse(f"embedding server {s.where} returned vectors of different dimensions "
                                  f"{sorted(dims)[:4]} in one response")
    if not all(isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) for r in rows for x in r):
        raise EmbedderBadResponse(f"embedding server {s.where} returned a vector with a non-number or "
                                  "non-finite component")
    return np.array(rows, dtype=np.float64)


def _translate(e: Exception, s: LitellmEmbedderSettings) -> EmbedderUnavailable:
    """One line of ours for a litellm failure: unreachable or refusing -> unavailable; garbled -> bad response."""
    chain: list[BaseException] = []
    cause: BaseException | None = e
    while cause is not None and len(chain) < 10:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    innermost = _first_line(chain[-1])
    if any(isinstance(c, json.JSONDecodeError) for c in chain):
        return EmbedderBadResponse(f"embedding server {s.where} sent a body that is not JSON: {innermost}")
    return EmbedderUnavailable(f"embedding server {s.where} failed: {_first_line(e)}")


def _first_line(e: BaseException) -> str:
    """The exception's message without litellm's repeated ``litellm.X: X: OpenAIException -`` prefixes."""
    text = (str(e).strip().splitlines() or [type(e).__name__])[0]
    text = _PREFIX.sub("", text).strip()
    return (text or type(e).__name__)[:200]


_PREFIX = re.compile(r"^(?:(?:litellm\.)?\w+(?:Error|Exception)\s*[:-]\s*)+")
