"""The pure parts of hybrid search: reciprocal-rank fusion, the subject boost, words and query terms."""

from __future__ import annotations

import math
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pmem.projections.fusion import RRF_K, SUBJECT_BOOST, TIE_BREAK, fused, rrf
from pmem.projections.lexical import (
    _WORD,
    COMMON_MIN,
    MAX_TERMS,
    POSTINGS_BUDGET,
    STOPWORDS,
    Phrases,
    chosen_terms,
    idf,
    names_subject,
    query_terms,
    subject_words,
    words,
)


def test_rrf_sums_one_over_k_plus_rank_across_channels() -> None:
    scores = rrf([["a", "b", "c"], ["b", "d"]])
    assert scores["a"] == pytest.approx(1 / (RRF_K + 1))
    assert scores["b"] == pytest.approx(1 / (RRF_K + 2) + 1 / (RRF_K + 1))
    assert scores["c"] == pytest.approx(1 / (RRF_K + 3))
    assert scores["d"] == pytest.approx(1 / (RRF_K + 2))
    assert rrf([["a", "a", "b"]])["b"] == pytest.approx(1 / (RRF_K + 3))  # a repeat keeps its rank's place
    assert rrf([]) == {}


def test_a_cell_both_channels_rank_beats_one_only_one_ranks_first() -> None:
    order = [c for c, _ in fused([["x", "both"], ["both", "y"]], set(), {})]
    assert order[0] == "both"


def test_the_subject_boost_lifts_a_named_subject_over_a_value_match() -> None:
    # "where is the toilet now?": the desk (value toilet) ranks first by cosine, the toilet first by words
    channels = [["desk.location", "toilet.location"], ["toilet.location", "desk.location"]]
    plain = dict(fused(channels, set(), {}))
    assert plain["desk.location"] == pytest.approx(plain["toilet.location"])
    ranked = fused(channels, {"toilet.location"}, {})
    assert ranked[0][0] == "toilet.location"
    assert ranked[0][1] == pytest.approx(plain["toilet.location"] + SUBJECT_BOOST)
    # and beats a cell both channels rank first
    assert fused([["a", "t"], ["a", "t"]], {"t"}, {})[0][0] == "t"


def test_equal_fusions_are_ordered_by_cosine_and_the_score_shown_is_the_sort_key() -> None:
    ranked = fused([["a"], ["b"]], set(), {"a": 0.2, "b": 0.9})
    assert [c for c, _ in ranked] == ["b", "a"]
    assert ranked[0][1] - ranked[1][1] == pytest.approx(TIE_BREAK * 0.7)
    scores = [s for _, s in fused([["a", "b", "c"], ["c", "d"]], {"d"}, {"a": 1.0, "c": -1.0})]
    assert scores == sorted(scores, reverse=True)


def test_words_split_keys_on_underscore_and_dot_and_fold_case_and_accents() -> None:
    assert words("toilet.location") == ["toilet", "location"]
    assert words("5k_pb: 25:50") == ["5k", "pb", "25", "50"]
    assert words("Café CAFÉ cafe\u0301") == ["cafe", "cafe", "cafe"]
    assert words("東京 Größe") == ["東京", "grosse"]
    assert words("!?._") == []


@given(st.text(alphabet=st.characters(max_codepoint=127)))
def test_words_of_ascii_text_are_those_of_the_unicode_path(text: str) -> None:
    """ASCII text skips NFKD and the dropping of marks (it has none): the same words either way."""
    folded = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    assert words(text) == _WORD.findall(folded.casefold())


def test_the_subject_is_the_key_before_its_first_dot_named_as_adjacent_words() -> None:
    assert subject_words("toilet.location") == ("toilet",)
    assert subject_words("entity_00042.country_of_citizenship") == ("entity", "00042")
    assert subject_words("home_city") == ("home", "city")
    q = words("What is the country of citizenship of Entity 00042?")
    assert names_subject(q, ("entity", "00042"))
    assert not names_subject(q, ("entity", "00043"))
    assert not names_subject(words("entity and then 00042"), ("entity", "00042"))  # not adjacent
    assert not names_subject(words("where is my desk"), ("my",))  # a stopword subject is never named
    assert not names_subject(q, ())
    assert names_subject(words("where is the toilet now?"), subject_words("toilet.location"))
    assert not names_subject(words("where is the toilet now?"), subject_words("desk.location"))


VOCAB = st.sampled_from(["entity", "00042", "my", "desk", "city", "person", "the"])


@given(st.lists(VOCAB, max_size=30), st.lists(st.lists(VOCAB, max_size=4), max_size=8))
def test_one_phrases_table_answers_as_a_scan_of_the_question_for_each_subject(
        question: list[str], subjects: list[list[str]]) -> None:
    asked = Phrases(question)
    for subject in subjects:
        n = len(subject)
        scanned = n > 0 and not all(w in STOPWORDS for w in subject) and any(
            question[i:i + n] == subject for i in range(len(question) - n + 1))
        assert asked.names(subject) == scanned, (question, subject)


def test_query_terms_drop_stopwords_unless_nothing_else_is_left() -> None:
    assert query_terms("Where is the toilet now?") == ["toilet"]
    assert query_terms("what is it") == ["what", "is", "it"]
    assert query_terms("toilet toilet TOILET") == ["toilet"]


def test_common_terms_are_left_out_of_the_lexical_query_rarest_kept() -> None:
    total = 100_000
    df = {"entity": 90_000, "country": 3_000, "00042": 1, "citizenship": 2_500}
    assert chosen_terms(["entity", "country", "citizenship", "00042", "absent"], df, total) == [
        "00042", "citizenship", "country"]
    assert chosen_terms(["entity"], df, total) == ["entity"]  # all common: the rarest alone
    assert chosen_terms(["absent"], df, total) == []
    assert chosen_terms(["a", "b"], {"a": 900, "b": 1_000}, 1_000) == ["a", "b"]  # under COMMON_MIN: kept
    assert chosen_terms(["a", "b"], {"a": 1, "b": COMMON_MIN + 1}, COMMON_MIN + 1) == ["a"]
    many = {f"t{i}": i + 1 for i in range(40)}
    assert chosen_terms(list(many), many, 1_000) == [f"t{i}" for i in range(MAX_TERMS)]


def test_a_lexical_query_holds_no_more_documents_than_its_budget_rarest_terms_first() -> None:
    total = 1_000_000
    df = {"zomida": 20, "corvin": 305, "origin": 4_193, "spouse": 4_139, "employer": 4_298, "city": 9_569}
    chosen = chosen_terms(list(df), df, total)
    assert chosen == ["zomida", "corvin", "spouse"]  # 4,464 documents; origin would pass the budget
    assert sum(df[t] for t in chosen) <= POSTINGS_BUDGET
    assert chosen_terms(["city"], {"city": POSTINGS_BUDGET + 1}, total) == ["city"]  # the rarest stays


def test_idf_is_positive_and_falls_with_document_frequency() -> None:
    assert idf(1, 1000) > idf(10, 1000) > idf(1000, 1000) > 0
    assert idf(0, 0) == pytest.approx(math.log(2.0))
