"""Edition 2 of the key rule (Unicode keys) and of the trust guard (every version an operation would close)."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pmem.domain.keys import normalize_key

EXAMPLES = {
    "5K PB": "5k_pb", "user.Home City": "user.home_city", "Zürich": "zürich",
    unicodedata.normalize("NFD", "Zürich"): "zürich", "Größe": "grösse", "Grüße": "grüsse", "ＡＢＣ": "abc",
    "東京": "東京", "  café au lait! ": "café_au_lait", "नमस्ते दुनिया": "नमस्ते_दुनिया", "ﬁle": "file",
    "a__b": "a_b", "__": "",
}


@pytest.mark.parametrize(("raw", "key"), sorted(EXAMPLES.items()))
def test_the_edition_2_examples(raw: str, key: str) -> None:
    assert normalize_key(raw) == normalize_key(raw, 2) == key


def test_edition_1_folds_every_non_ascii_letter_as_it_always_did() -> None:
    assert normalize_key("Größe", 1) == normalize_key("Grüße", 1) == "gr_e"
    assert normalize_key("東京", 1) == "" and normalize_key("café", 1) == "caf"


@given(st.text(alphabet=st.characters(max_codepoint=127)))
def test_for_ascii_the_editions_agree(raw: str) -> None:
    assert normalize_key(raw, 1) == normalize_key(raw, 2)


@given(st.text())
def test_a_normalised_key_is_a_fixed_point_of_both_rules_that_apply_to_it(raw: str) -> None:
    key = normalize_key(raw)
    assert normalize_key(key) == key
    assert normalize_key(normalize_key(raw, 1), 2) == normalize_key(raw, 1)  # edition-1 keys are edition-2 keys
    assert not key.startswith("_") and not key.endswith("_") and "__" not in key
