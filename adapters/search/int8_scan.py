"""An exact top-``m`` prefilter for ``flat`` search: a scan of int8 copies of the vectors.

FAISS ``IndexScalarQuantizer`` with ``QT_8bit_direct_signed`` stores each component as an int8 and,
given an integer-valued query, computes exact integer dot products with SIMD: a quarter of the
bytes of a float32 scan, and much less of its CPU time.
Vectors are stored as ``c = round(x * S)`` (``S`` maps the largest component seen to 127, later
vectors are clipped) and the query as ``p = round(q * T)`` (``T`` maps its largest to 127), so the
scan's score ``p.c / (T S)`` is the exact inner product of the rounded vectors ``q' = p/T`` and
``x' = c/S``. Since ``q.x - q'.x' = q.(x - x') + (q - q').x'``,

    |q.x - approx| <= |q| * E + |q - q'| * N

where ``E`` is the largest ``|x - x'|`` and ``N`` the largest ``|x'|`` over the stored vectors (both
measured when a vector is added, clipping included). Every vector the scan did not return scores at
most the ``m``-th approximate score, so its exact score is below that plus the bound
(:attr:`Scan.limit`): the caller re-ranks the ``m`` returned exactly and knows whether they hold the
true top ones. The copies live in memory only; they cost ``dim`` bytes per vector.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import faiss
import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]
Ids = npt.NDArray[np.int64]
SLACK = 1e-3  # added to the bound: float32 rounding where the exact scores are computed
CHUNK = 8_192  # vectors encoded at a time (temporaries of a few MB)


@dataclass(frozen=True, slots=True)
class Scan:
    """The ``m`` best ids by approximate score (fewer: all the eligible ones) and ``limit``, above
    the exact score of every eligible vector not among them."""

    ids: Ids
    limit: float


class Int8Scan:
    """int8 copies of a matrix's rows, ids ``0 .. count-1``, searched by exact integer products."""

    def __init__(self, matrix: Vectors) -> None:
        top = float(np.abs(matrix).max()) if len(matrix) else 0.0
        self.scale = 127.0 / top if top > 0 else 1.0
        self.index = faiss.IndexScalarQuantizer(matrix.shape[1], faiss.ScalarQuantizer.QT_8bit_direct_signed,
                                                faiss.METRIC_INNER_PRODUCT)
        self.built_on = len(matrix)  # vectors the scale was chosen from
        self.error = 0.0  # E: the largest |x - x'|
        self.norm = 0.0  # N: the largest |x'|
        for start in range(0, len(matrix), CHUNK):
            self.add(matrix[start:start + CHUNK])

    @property
    def count(self) -> int:
        return int(self.index.ntotal)

    def add(self, vectors: Vectors) -> None:
        """Append vectors (ids continue from :attr:`count`)."""
        codes = np.clip(np.rint(vectors * self.scale), -128, 127).astype(np.float32)
        rounded = codes / self.scale
        self.error = max(self.error, float(np.linalg.norm(vectors - rounded, axis=1).max()))
        self.norm = max(self.norm, float(np.linalg.norm(rounded, axis=1).max()))
        self.index.add(codes)  # integer-valued floats: stored exactly as int8

    def search(self, query: Vectors, m: int, selector: Any = None) -> Scan | None:
        """The ``m`` best ids among those ``selector`` admits (all when None); None for a zero query,
        which scores 0 against everything and has nothing to scan for."""
        top = float(np.abs(query).max())
        if top == 0:
            return None
        t = 127.0 / top
        p = np.rint(query * t).astype(np.float32).reshape(1, -1)
        # faiss's stubs give SearchParameters() no arguments; its Python wrapper sets keyword fields
        params = None if selector is None else faiss.SearchParameters(sel=selector)  # type: ignore[call-arg]
        approx, found = self.index.search(p, m, params=params)
        keep = found[0] >= 0
        ids = found[0][keep]
        if not len(ids):
            return Scan(ids, -np.inf)
        q_error = float(np.linalg.norm(query - p[0] / t))
        bound = float(np.linalg.norm(query)) * self.error + q_error * self.norm + SLACK
        return Scan(ids, float(approx[0][keep].min()) / (t * self.scale) + bound)
