"""Ports the projections need from the outside world, as small Protocols (STYLE habit 5).

An :class:`Embedder` turns texts into unit vectors. The vector index never cares which one it gets:
the deterministic hashing embedder in :mod:`pmem.adapters.embedders.hashing_embedder` serves tests and offline use,
an ONNX sentence embedder can replace it later.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # numpy is imported only by the code that searches (the CLI must start fast)
    import numpy as np
    import numpy.typing as npt


class Embedder(Protocol):
    """Texts in, one L2-normalised float32 row per text out (shape ``(len(texts), dim)``).

    ``name`` identifies the vectors it makes (model and dimension): a cached index built by another
    embedder is discarded instead of being mixed with new vectors.
    """

    @property
    def dim(self) -> int: ...

    @property
    def name(self) -> str: ...

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...


VECTOR_INDEX_KINDS = ("flat", "hnsw", "lsh")  # the settings a vector index accepts (search.faiss_index)
