"""A deterministic embedder by feature hashing: no model files, same vectors on every machine.

Features of a text (lower-cased, split into ``\\w+`` words): each word (weight 1), each pair of
adjacent words (0.5) and the character 3-, 4- and 5-grams of each word padded with spaces (0.2).
Each feature is hashed with CRC-32 to a dimension and a sign; the sum is L2-normalised. A text with
no word characters embeds to the zero vector (it scores 0 against everything).

It is a stand-in for a sentence embedder: it matches shared words and word pieces, not meaning.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator, Sequence

import numpy as np
import numpy.typing as npt

_WORD = re.compile(r"\w+")
WORD_WEIGHT, PAIR_WEIGHT, GRAM_WEIGHT = 1.0, 0.5, 0.2
GRAM_SIZES = (3, 4, 5)


class HashingEmbedder:
    """Feature hashing of words, word pairs and character n-grams into ``dim`` dimensions."""

    def __init__(self, dim: int = 384) -> None:
        if dim < 2:
            raise ValueError(f"dim must be at least 2, got {dim}")
        self._dim = dim

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def name(self) -> str:
        return f"hashing-v1-{self._dim}"

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if isinstance(texts, str):  # a string is a sequence of one-character texts: never what was meant
            raise TypeError("embed() takes a sequence of texts, not one string")
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for row, text in enumerate(texts):
            vec = out[row]
            for feature, weight in _features(text):
                h = zlib.crc32(feature.encode("utf-8"))
                vec[h % self._dim] += -weight if h >> 31 else weight
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out


def _features(text: str) -> Iterator[tuple[str, float]]:
    words = _WORD.findall(text.lower())
    for i, word in enumerate(words):
        yield "w:" + word, WORD_WEIGHT
        if i:
            yield f"p:{words[i - 1]} {word}", PAIR_WEIGHT
        padded = f" {word} "
        for n in GRAM_SIZES:
            for j in range(len(padded) - n + 1):
                yield "c:" + padded[j:j + n], GRAM_WEIGHT
