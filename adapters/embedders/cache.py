"""An embedding cache keyed by text: re-embedding a text the cache has seen never runs the model again.

:class:`CachedEmbedder` wraps any embedder (``name``, ``dim``, ``embed(texts)``) and is one itself.
Vectors live in a :class:`MemoryEmbeddingCache` (a dict, per process) or a
:class:`SqliteEmbeddingCache`: a table ``pmem_embedding_cache`` in the store's own SQLite file,
keyed by (embedder name, sha256 of the text), so a cache survives restarts and never mixes models.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from pmem.domain.errors import StoreUnavailable


class _Embedder(Protocol):
    """Structurally the ``Embedder`` port (projections/ports.py)."""

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


class EmbeddingCache(Protocol):
    """Where :class:`CachedEmbedder` keeps vectors."""

    def get_many(self, model: str, texts: Sequence[str]) -> dict[str, np.ndarray]: ...

    def put_many(self, model: str, vectors: Mapping[str, np.ndarray]) -> None: ...

    def drop_texts(self, texts: Iterable[str]) -> None: ...


class MemoryEmbeddingCache:
    """A per-process dict cache."""

    def __init__(self) -> None:
        self._data: dict[tuple[str, str], np.ndarray] = {}

    def get_many(self, model: str, texts: Sequence[str]) -> dict[str, np.ndarray]:
        return {t: self._data[model, t] for t in texts if (model, t) in self._data}

    def put_many(self, model: str, vectors: Mapping[str, np.ndarray]) -> None:
        for text, v in vectors.items():
            self._data[model, text] = v

    def drop_texts(self, texts: Iterable[str]) -> None:
        """Drop the vectors of these texts, for every model (a cell was forgotten)."""
        gone = set(texts)
        for k in [k for k in self._data if k[1] in gone]:
            del self._data[k]

    def __len__(self) -> int:
        return len(self._data)

    def close(self) -> None:
        """Nothing to release (a store closes the cache of an embedder it built)."""


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class SqliteEmbeddingCache:
    """Vectors in a table of a SQLite file (normally the store file itself)."""

    _SCHEMA = ("CREATE TABLE IF NOT EXISTS pmem_embedding_cache ("
               "model TEXT NOT NULL, text_sha256 BLOB NOT NULL, dim INTEGER NOT NULL, vector BLOB NOT NULL, "
               "PRIMARY KEY (model, text_sha256)) WITHOUT ROWID")

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        try:
            self._db = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
            self._db.execute(self._SCHEMA)
            self._db.commit()
        except sqlite3.Error as e:
            raise StoreUnavailable(f"cannot open the embedding cache in {self.path}: {e}") from e

    def get_many(self, model: str, texts: Sequence[str]) -> dict[str, np.ndarray]:
        by_digest = {_digest(t): t for t in texts}
        found: dict[str, np.ndarray] = {}
        keys = list(by_digest)
        try:
            for start in range(0, len(keys), 500):
                chunk = keys[start:start + 500]
                rows = self._db.execute(
                    "SELECT text_sha256, dim, vector FROM pmem_embedding_cache WHERE model = ? AND text_sha256 IN "
                    f"({','.join('?' * len(chunk))})", [model, *chunk]).fetchall()
                for digest, dim, blob in rows:
                    found[by_digest[digest]] = np.frombuffer(blob, dtype=np.float32, count=dim)
        except sqlite3.Error as e:
            raise StoreUnavailable(f"cannot read the embedding cache in {self.path}: {e}") from e
        return found

    def put_many(self, model: str, vectors: Mapping[str, np.ndarray]) -> None:
        rows = [(model, _digest(t), int(v.shape[0]), np.ascontiguousarray(v, dtype=np.float32).tobytes())
                for t, v in vectors.items()]
        try:
            with self._db:
                self._db.executemany("INSERT OR REPLACE INTO pmem_embedding_cache VALUES (?, ?, ?, ?)", rows)
        except sqlite3.Error as e:
            raise StoreUnavailable(f"cannot write the embedding cache in {self.path}: {e}") from e

    def drop_texts(self, texts: Iterable[str]) -> None:
        """Delete the vectors of these texts, for every model (a cell was forgotten), with
        ``secure_delete`` on: the freed bytes are overwritten."""
        digests = [_digest(t) for t in set(texts)]
        try:
            self._db.execute("PRAGMA secure_delete=ON")
            with self._db:
                for start in range(0, len(digests), 500):  # one pass over the table per 500 texts
                    chunk = digests[start:start + 500]
                    self._db.execute("DELETE FROM pmem_embedding_cache WHERE text_sha256 IN "
                                     f"({','.join('?' * len(chunk))})", chunk)
        except sqlite3.Error as e:
            raise StoreUnavailable(f"cannot write the embedding cache in {self.path}: {e}") from e

    def __len__(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM pmem_embedding_cache").fetchone()[0])

    def close(self) -> None:
        self._db.close()


class CachedEmbedder:
    """An embedder that asks ``inner`` only for texts its cache has not seen (each distinct text once)."""

    def __init__(self, inner: _Embedder, cache: EmbeddingCache | None = None) -> None:
        self.inner = inner
        self.cache: EmbeddingCache = cache if cache is not None else MemoryEmbeddingCache()
        self.hits = 0
        self.misses = 0

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """The same vectors ``inner`` gives, from the cache where it has them."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one string")
        wanted = list(dict.fromkeys(texts))
        known = self.cache.get_many(self.name, wanted)
        missing = [t for t in wanted if t not in known]
        if missing:
            fresh = self.inner.embed(missing)
            new = {t: fresh[i] for i, t in enumerate(missing)}
            self.cache.put_many(self.name, new)
            known.update(new)
        self.misses += len(missing)
        self.hits += len(texts) - len(missing)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i] = known[t]
        return out
