"""Vectors by dense id in a FAISS index of a selectable kind, saved as one atomic cache file.

Kinds (setting ``PMEM_VECTOR_INDEX`` or ``Store(vector_index=...)``):

- ``flat`` (default): exact. Candidates come from a scan of int8 copies of the vectors
  (:mod:`pmem.adapters.search.int8_scan`: a quarter of the bytes of float32, integer SIMD products) and are
  re-ranked by exact float32 cosine. The scan bounds how far its scores can be from the exact ones,
  so the candidates provably hold the top ``k`` cells when the ``k``-th cell's exact score reaches
  the bound of those left out; when it does not, more are fetched, and in the end every eligible
  vector is scored exactly. Below :data:`SQ_MIN` eligible vectors it scores them all exactly instead;
- ``hnsw``: ``IndexIDMap2(IndexHNSWFlat(dim, 32, METRIC_INNER_PRODUCT))``, approximate;
- ``lsh``: ``IndexIDMap2(IndexLSH(dim, 2*dim))``, approximate (Hamming distance of random projections).

Ids are ``0 .. count-1`` in the order vectors were added, and the raw float32 matrix is kept too, so
results are always scored by exact cosine (the vectors are unit length) whichever kind found them.
Eligibility is a bitmap (``IDSelectorBitmap``) inside the FAISS search for ``flat`` and ``hnsw``, and
no filter at all when every vector is eligible; ``lsh`` does not support one, so it over-fetches and
filters. A single query is searched on one OpenMP thread: FAISS parallelises over queries, and a
second thread only waits at the barrier, which costs more than the one search it would share.

The cache file is ``PMEMVEC1\\n`` + one JSON header line + the matrix + (``hnsw`` only: building the
graph is costly) the serialized index. The int8 copies are not saved: they are made from the
matrix on the first search that needs them (one pass over it). The file is
written to a temporary file, fsynced and moved into place with ``os.replace``, so a crash leaves the
old file or the new one, never a header that does not match its vectors. The header names the kind,
the embedder, the count and the event index.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import faiss
import numpy as np
import numpy.typing as npt

from pmem.adapters.search.int8_scan import Int8Scan
from pmem.domain.errors import StoreUnavailable
from pmem.projections.ports import VECTOR_INDEX_KINDS

if TYPE_CHECKING:
    from pmem.adapters.search.eligible import EligibleSet

KINDS = VECTOR_INDEX_KINDS
MAGIC = b"PMEMVEC1\n"
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 200
HNSW_EF_SEARCH = 64
SQ_MIN = 20_000  # below this many eligible vectors, flat scores them all exactly (no int8 copies)
SQ_FETCH = 256  # candidates fetched from the int8 scan in the first round
Vectors = npt.NDArray[np.float32]
Ids = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Header:
    """What a cache file holds: which vectors (``embedder``, ``count``) as of which event index."""

    kind: str
    dim: int
    embedder: str
    count: int
    position: int
    last_text: str  # the text of the last vector: a cheap check that the file belongs to this store


@dataclass(frozen=True, slots=True)
class Candidates:
    """Ids the index ranks best among the eligible ones, and what it guarantees about the rest.

    ``complete``: these are all the eligible ids. Otherwise ``limit``, when not None, is a strict upper
    bound on the exact score of every eligible vector left out (exact kinds); None means an
    approximate index may have missed better vectors.
    """

    ids: Ids
    complete: bool
    limit: float | None


class FaissIndex:
    """A FAISS index plus the raw vectors, ids dense from 0."""

    def __init__(self, kind: str, dim: int, index: Any = None, matrix: Vectors | None = None) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown vector index kind {kind!r} (expected {', '.join(KINDS)})")
        self.kind, self.dim = kind, dim
        self._rows = np.zeros((0, dim), dtype=np.float32) if matrix is None else matrix
        self._count = len(self._rows)
        self.index = None if kind == "flat" else index if index is not None else _new_index(kind, dim)
        if index is None and self.index is not None and self._count:
            self.index.add_with_ids(self.matrix, np.arange(self._count, dtype=np.int64))
        self._scan: Int8Scan | None = None  # flat: int8 copies, built on the first search that uses them

    @property
    def count(self) -> int:
        return self._count

    @property
    def matrix(self) -> Vectors:
        """The raw vectors, row ``i`` being id ``i`` (a view: rows are appended in place)."""
        return self._rows[:self._count]

    def add(self, vectors: Vectors) -> None:
        """Append vectors; they get the next ids."""
        if not len(vectors):
            return
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        start, stop = self._count, self._count + len(vectors)
        if stop > len(self._rows):  # grow by doubling: appending one vector must not copy them all
            rows = np.empty((max(stop, 2 * len(self._rows), 1024), self.dim), dtype=np.float32)
            rows[:start] = self.matrix
            self._rows = rows
        self._rows[start:stop] = vectors
        self._count = stop
        if self.index is not None:
            self.index.add_with_ids(vectors, np.arange(start, stop, dtype=np.int64))
        if self._scan is not None:
            if stop >= 2 * self._scan.built_on:  # its scale was chosen from half the vectors or fewer
                self._scan = None  # built again from all of them on the next search
            else:
                self._scan.add(vectors)

    def scores(self, query: Vectors, ids: Ids) -> Vectors:
        """Exact cosine of the query with the vectors ``ids``."""
        return dot(self._rows[ids], query)

    def _exact_scores(self, query: Vectors, ids: Ids) -> Vectors:
        """Exact scores of ``ids``: a pass over all rows, or over a copy of the few eligible ones."""
        return dot(self.matrix, query)[ids] if 4 * len(ids) > self._count else self.scores(query, ids)

    def first_fetch(self, k: int, eligible: int) -> int:
        """How many candidates the first round asks for, to find ``k`` cells among ``eligible`` vectors."""
        base = SQ_FETCH if self.kind == "flat" and eligible >= SQ_MIN else 64
        return min(eligible, max(4 * k, base))

    def candidates(self, query: Vectors, eligible: EligibleSet, m: int) -> Candidates:
        """The ``m`` (or, for ties, a few more) eligible ids the index ranks best."""
        ids = eligible.ids
        if m >= len(ids):
            return Candidates(ids, True, None)
        q = np.ascontiguousarray(query.reshape(1, -1), dtype=np.float32)
        everyone = len(ids) == self._count  # every vector is eligible: nothing to filter
        if self.kind == "flat":
            if len(ids) < SQ_MIN:
                return _exact_top(self._exact_scores(q[0], ids), ids, m)
            return self._quantised_candidates(q, eligible, m, everyone)
        if self.kind == "lsh" and not everyone:  # no selector support: over-fetch, then filter
            fetch = min(self._count, m * max(1, -(-self._count // len(ids))))
            found = _search(self.index, q, fetch, None)
            return Candidates(found[eligible.contains(found)][:m], False, None)
        params = None
        if self.kind == "hnsw":
            ef = max(HNSW_EF_SEARCH, m)
            # faiss's bundled stubs omit SearchParametersHNSW (it exists at runtime, from SWIG)
            params = (faiss.SearchParametersHNSW(efSearch=ef) if everyone  # type: ignore[attr-defined]
                      else faiss.SearchParametersHNSW(sel=eligible.selector(), efSearch=ef))  # type: ignore[attr-defined]
        return Candidates(_search(self.index, q, m, params), False, None)

    def _quantised_candidates(self, q: Vectors, eligible: EligibleSet, m: int, everyone: bool) -> Candidates:
        """``flat`` on many vectors: the ``m`` best by the int8 scan, with its exact bound."""
        if self._scan is None:
            self._scan = Int8Scan(self.matrix)
        with _one_thread():
            found = self._scan.search(q[0], m, None if everyone else eligible.selector())
        if found is None:  # a zero query: every score is 0, any m are the best
            return _exact_top(self._exact_scores(q[0], eligible.ids), eligible.ids, m)
        if len(found.ids) < m:  # the scan found fewer than asked: that is all of them
            return Candidates(np.sort(found.ids), True, None)
        return Candidates(found.ids, False, found.limit)

    # -- the cache file ------------------------------------------------------
    def save(self, path: Path, header: Header) -> None:
        """Write atomically: temp file, fsync, ``os.replace``, fsync the directory."""
        head = json.dumps(asdict(header)).encode()
        tmp = path.with_name(f"{path.name}.tmp-{uuid.uuid4().hex}")  # unique per writer
        try:
            with open(tmp, "wb") as fh:
                fh.write(MAGIC + head + b"\n")
                fh.write(np.ascontiguousarray(self.matrix).tobytes())
                if self.kind == "hnsw":
                    assert self.index is not None  # every kind but flat has an index
                    fh.write(faiss.serialize_index(self.index).tobytes())
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
            dir_fd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise StoreUnavailable(f"cannot write the vector index cache {path}: {e.strerror or e}") from e

    @classmethod
    def load(cls, path: Path) -> tuple[FaissIndex, Header] | None:
        """The index and header in ``path``; None when it is missing, truncated or not a cache file.
        The matrix is read straight into its array (no second copy of the file in memory)."""
        try:
            with open(path, "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                if fh.read(len(MAGIC)) != MAGIC:
                    return None
                try:
                    header = Header(**json.loads(fh.readline()))
                except (ValueError, TypeError):
                    return None
                if not all(type(v) is int and v >= 0 for v in (header.count, header.dim, header.position)):
                    return None
                start, nbytes = fh.tell(), header.count * header.dim * 4
                if header.kind not in KINDS or size < start + nbytes or (header.kind != "hnsw" and
                                                                         size != start + nbytes):
                    return None
                matrix = np.empty((header.count, header.dim), dtype=np.float32)
                # (an empty matrix has no bytes to read, and a zero-sized view cannot be cast)
                if nbytes and fh.readinto(matrix.data.cast("B")) != nbytes:
                    return None
                rest = fh.read() if header.kind == "hnsw" else b""
        except OSError:
            return None
        index = None
        if header.kind == "hnsw":
            try:
                index = faiss.deserialize_index(np.frombuffer(rest, dtype=np.uint8))
            except RuntimeError:
                return None
            if index.ntotal != header.count:
                return None
        return cls(header.kind, header.dim, index, matrix), header


@contextmanager
def _one_thread() -> Iterator[None]:
    """Run one query's FAISS search on one OpenMP thread (see the module docstring)."""
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


def dot(rows: Vectors, query: Vectors) -> Vectors:
    """``rows @ query`` on this thread, row by row with SIMD (FAISS ``fvec_inner_products_ny``):
    numpy hands a product this size to OpenBLAS threads, and waking them costs more than the product
    itself, most of all on a loaded machine. Each row's score does not depend on the other rows,
    so a vector scores the same whichever set it is scored in."""
    rows = np.ascontiguousarray(rows, dtype=np.float32)
    q = np.ascontiguousarray(query, dtype=np.float32)
    out = np.empty(len(rows), dtype=np.float32)
    if len(rows):
        # faiss's bundled stubs omit fvec_inner_products_ny (it exists at runtime, from SWIG)
        faiss.fvec_inner_products_ny(  # type: ignore[attr-defined]
            faiss.swig_ptr(out), faiss.swig_ptr(q), faiss.swig_ptr(rows), rows.shape[1], len(rows))
    return out


def _search(index: Any, q: Vectors, m: int, params: Any) -> Ids:
    with _one_thread():
        _, found = index.search(q, m, params=params)
    ids: Ids = found[0][found[0] >= 0]
    return ids


def _exact_top(scores: Vectors, eligible: Ids, m: int) -> Candidates:
    """The ``m`` best of ``eligible`` by their exact ``scores``. Ids tied with the ``m``-th score are
    all kept, so the result does not depend on how ties are broken, and every id left out scores
    strictly below the ``m``-th."""
    cut = float(np.partition(scores, len(scores) - m)[len(scores) - m])
    return Candidates(eligible[scores >= cut], False, cut)


def _new_index(kind: str, dim: int) -> Any:
    """The FAISS index of an approximate kind (``flat`` needs none: see the module docstring)."""
    base: faiss.Index
    if kind == "hnsw":
        graph = faiss.IndexHNSWFlat(dim, HNSW_M, faiss.METRIC_INNER_PRODUCT)
        graph.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
        base = graph
    else:
        base = faiss.IndexLSH(dim, 2 * dim)
    return faiss.IndexIDMap2(base)
