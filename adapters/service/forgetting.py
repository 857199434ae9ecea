"""The forget use case (docs/forgetting.md): make a cell's values, evidence texts, sources and
reasons unrecoverable without breaking the log.

:meth:`pmem.adapters.eventstore.eventlog.EventLog.forget` appends ``Forgotten`` to each cell and deletes
its data key in one transaction (crypto-shredding: what the log holds of the cell can no longer be
opened). Then every copy P-Mem made of the plaintext goes: each projection scrubs the cell's rows as
it applies the event (frontier, graph, lexical with an FTS5 ``optimize``, vector texts); the FAISS
index and its cache file are dropped and built again from the scrubbed texts; the embedding cache
loses the vectors of the cell's texts; then SQLite's WAL is checkpointed and truncated (every
delete ran with ``secure_delete`` on), or PostgreSQL's tables are ``VACUUM``ed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pmem.adapters.service.bootstrap import Wiring
from pmem.adapters.service.doctor import write_checked
from pmem.adapters.service.reads import checked_key
from pmem.domain.errors import InvalidOperation
from pmem.domain.keys import cell_id, normalize_key
from pmem.domain.operations import checked_namespace, shown
from pmem.domain.views import Receipt
from pmem.projections.ports import VECTOR_INDEX_KINDS


class Forgetting:
    """Forget one cell, or every cell of a subject, in a namespace."""

    def __init__(self, wiring: Wiring) -> None:
        self.w = write_checked(wiring)

    def forget(self, key: str | None = None, *, subject: str | None = None,
               namespace: str | None = None) -> list[Receipt]:
        """One receipt per cell forgotten (none when there was nothing left to forget)."""
        ns = self.w.namespace if namespace is None else checked_namespace(namespace)
        if (key is None) == (subject is None):
            raise InvalidOperation("forget takes a key or a subject (one of them)", field="key")
        if key is not None:
            keys = [self._normalised(key, "key")]
        else:
            keys = self._subject_keys(ns, self._normalised(subject, "subject"))
        if not keys:
            return []
        log = self.w.log.get()
        texts = _plaintexts(log, ns, keys)  # read while the keys exist: the embedding cache is keyed by them
        receipts = log.forget([(ns, k) for k in keys])
        if receipts:
            self._scrub(log, texts)
        return receipts

    def _normalised(self, raw: object, name: str) -> str:
        key = normalize_key(checked_key(raw), self.w.key_edition)
        if not key:
            raise InvalidOperation(f"{name} {shown(raw, 200)} is empty after normalisation", field=name)
        return key

    def _subject_keys(self, ns: str, subject: str) -> list[str]:
        """The keys of the subject: ``subject`` itself and every ``subject.*`` (the part of a key before
        its first ``.`` is its subject), among the cells the namespace has ever held."""
        frontier = self.w.projections["frontier"]
        with self.w.lock:
            frontier.catch_up(progress=self.w.progress)
            rows = self.w.projection_db.execute(
                "SELECT key FROM cells WHERE namespace = ? AND (key = ? OR substr(key, 1, ?) = ?) ORDER BY key",
                (ns, subject, len(subject) + 1, subject + ".")).fetchall()
        return [str(r[0]) for r in rows]

    def _scrub(self, log: Any, texts: set[str]) -> None:
        with self.w.lock:
            for projection in self.w.projections.values():
                projection.catch_up(progress=self.w.progress)
            self._vectors(log)
        self._embedding_cache(texts)
        recorder = log.recorder
        if hasattr(recorder, "vacuum"):
            recorder.vacuum()
        if hasattr(recorder, "checkpoint"):
            recorder.checkpoint()

    def _vectors(self, log: Any) -> None:
        """The vector tables scrub the cell's texts as they catch up; the FAISS index in memory and
        every cache file are dropped (built again from the tables on the next search)."""
        if self.w.vectors is not None:
            self.w.vectors.projection.catch_up()
            self.w.vectors.drop_vectors()
        elif "pmem_vec_versions" in self.w.projection_db.names():
            from pmem.adapters.readmodels.vector_projection import VectorProjection

            tables = VectorProjection(log)
            try:
                tables.catch_up()
            finally:
                tables.close()
        for kind in VECTOR_INDEX_KINDS:
            path = self.w.backend.cache_path(f"vec-{kind}")
            if path is not None:
                path.unlink(missing_ok=True)

    def _embedding_cache(self, texts: set[str]) -> None:
        slot = self.w.embedders
        built = getattr(slot, "_embedder", None)
        cache = getattr(built, "cache", None)
        if cache is not None and hasattr(cache, "drop_texts"):
            cache.drop_texts(texts)
        path = self.w.backend.embedding_cache_path()
        if path is not None and Path(path).exists() and getattr(cache, "path", None) != str(path):
            from pmem.adapters.embedders.cache import SqliteEmbeddingCache

            on_disk = SqliteEmbeddingCache(path)
            try:
                on_disk.drop_texts(texts)
            finally:
                on_disk.close()


def _plaintexts(log: Any, ns: str, keys: list[str]) -> set[str]:
    """Every text the embedding cache may hold of these cells: each value (alone, as an entity of the
    graph, and as the ``key: value`` a version is embedded as) and each evidence text."""
    from pmem.projections.vectors import version_text  # loads eventsourcing: only when forgetting

    out: set[str] = set()
    for events in log.cell_events([cell_id(ns, k) for k in keys]).values():
        for _, e in events:
            values = [getattr(e, "value", None), getattr(e, "rejected", None)]
            for v in values:
                if v is not None:
                    out.update((v, version_text(e.key, v)))
            if e.text is not None:
                out.add(e.text)
    return out
