"""The versions a search may return, as the vector index wants them (docs/reading.md).

An :class:`EligibleSet` holds the versions open at one event index of one namespace: their cells by
vector id, a boolean mask over vector ids, the sorted ids and a FAISS ``IDSelectorBitmap`` over the
mask (the last two built on first use after a change). The set for the head of the log is kept up to
date in place by :meth:`EligibleSet.update` as new events open and close versions, so a search of
the current head neither reads all intervals again nor rebuilds the arrays.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from pmem.adapters.readmodels.vector_projection import Eligible

Ids = npt.NDArray[np.int64]


class EligibleSet:
    """Versions open at one event index: ``by_id`` (vector id -> cell), ``mask``, ``ids``, ``selector``."""

    def __init__(self, eligible: Iterable[Eligible] = ()) -> None:
        self.by_id: dict[int, Eligible] = {}
        self.mask: npt.NDArray[np.bool_] = np.zeros(0, dtype=bool)
        self._ids: Ids | None = None
        self._selector: Any = None
        self.update((e, True) for e in eligible)

    def __len__(self) -> int:
        return len(self.by_id)

    @property
    def ids(self) -> Ids:
        """The eligible vector ids, ascending."""
        if self._ids is None:
            self._ids = np.flatnonzero(self.mask).astype(np.int64)
        return self._ids

    def selector(self) -> Any:
        """A FAISS ``IDSelectorBitmap`` of the eligible ids (it keeps a reference to its bitmap)."""
        if self._selector is None:
            import faiss

            # faiss's stubs give the SWIG signature (n, bitmap); its Python wrapper takes the bitmap alone
            self._selector = faiss.IDSelectorBitmap(  # type: ignore[call-arg]
                np.packbits(self.mask, bitorder="little"))  # type: ignore[arg-type]
        return self._selector

    def contains(self, ids: Ids) -> npt.NDArray[np.bool_]:
        """Which of ``ids`` (any non-negative ids) are eligible."""
        inside = ids < len(self.mask)
        out = np.zeros(len(ids), dtype=bool)
        out[inside] = self.mask[ids[inside]]
        return out

    def update(self, changes: Iterable[tuple[Eligible, bool]]) -> None:
        """Apply ``(version, open)`` pairs: an open version joins the set, a closed one leaves it."""
        changed = False
        for e, is_open in changes:
            if is_open:
                if e.vector_id >= len(self.mask):
                    self._grow(e.vector_id + 1)
                self.by_id[e.vector_id] = e
            elif self.by_id.pop(e.vector_id, None) is None:
                continue
            self.mask[e.vector_id] = is_open
            changed = True
        if changed:
            self._ids, self._selector = None, None

    def _grow(self, size: int) -> None:
        grown = np.zeros(max(size, 2 * len(self.mask)), dtype=bool)
        grown[:len(self.mask)] = self.mask
        self.mask = grown
