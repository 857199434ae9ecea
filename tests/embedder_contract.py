"""One contract suite for the ``Embedder`` port (projections/ports.py), run against every implementation.

Subclass :class:`EmbedderContract` with a ``subject`` fixture: the ONNX model and its caches
(tests/integration/test_onnx_embedder.py), the hashing embedder (tests/unit/test_embedder_contract.py)
and the litellm embedder against a real local HTTP server (tests/integration/test_litellm_embedder.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

PARAPHRASES = [
    ("The cat sits on the mat.", "A cat is sitting on a mat."),
    ("My 5k personal best is 25 minutes 50.", "I ran my fastest 5k in 25:50."),
    ("The capital of France is Paris.", "Paris is France's capital city."),
    ("The mug has been moved to the countertop.", "Someone put the mug on the counter."),
]


class EmbedderContract:
    """What every embedder promises; subclass with a ``subject`` fixture."""

    TEXTS = [t for pair in PARAPHRASES for t in pair] + ["x" * 5000, "Zürich ist schön"]

    def test_it_names_itself_and_its_dimension(self, subject: Any) -> None:
        assert isinstance(subject.name, str) and subject.name
        assert isinstance(subject.dim, int) and subject.dim > 0

    def test_it_gives_one_unit_length_float32_row_per_text(self, subject: Any) -> None:
        v = subject.embed(self.TEXTS)
        assert v.shape == (len(self.TEXTS), subject.dim) and v.dtype == np.float32
        assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)

    def test_a_blank_text_gives_a_unit_or_a_zero_row_and_leaves_its_neighbours_alone(self, subject: Any) -> None:
        v = subject.embed(["", self.TEXTS[0], "   "])
        assert v.shape == (3, subject.dim)
        for row in (v[0], v[2]):
            assert abs(float(np.linalg.norm(row)) - 1.0) < 1e-5 or not row.any()
        assert np.allclose(v[1], subject.embed([self.TEXTS[0]])[0], atol=1e-5)

    def test_rows_follow_the_order_of_the_texts_and_repeat_exactly(self, subject: Any) -> None:
        v = subject.embed(self.TEXTS)
        w = subject.embed(self.TEXTS[::-1])
        assert np.allclose(v, w[::-1], atol=1e-5)

    def test_different_texts_give_different_rows(self, subject: Any) -> None:
        v = subject.embed(self.TEXTS)
        assert len({row.tobytes() for row in v}) == len(self.TEXTS)

    def test_no_texts_give_an_empty_matrix_and_one_string_is_refused(self, subject: Any) -> None:
        assert subject.embed([]).shape == (0, subject.dim)
        with pytest.raises(TypeError):
            subject.embed("one string")
