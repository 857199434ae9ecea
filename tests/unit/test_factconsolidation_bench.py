"""The FactConsolidation harness's scoring (benchmarks/factconsolidation.py) on small made-up inputs, and
the stream generator (benchmarks/fc_streams.py): no model, no network."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.factconsolidation import (
    Question,
    RawTopK,
    Tally,
    contains_gold,
    load_facts,
    load_questions,
    overridden,
    pick,
    stale_lines,
)
from benchmarks.fc_streams import generate
from benchmarks.validity_fc import slot_chains
from tests.conftest import ROOT

DATA = ROOT / "tests" / "data" / "factconsolidation"  # the 6k stream and the templates, kept with the tests
FACTS = ["Ada Lovelace is a citizen of France.", "The capital of France is Paris.",
         "Ada Lovelace is a citizen of Belgium.", "The capital of Belgium is Brussels.",
         "Rogério Ceni plays the position of goalkeeper.", "Rogério Ceni plays the position of midfielder.",
         "Rogério Ceni plays the position of goalkeeper."]


def test_gold_is_a_normalized_substring_of_the_reply() -> None:
    assert contains_gold("The answer is Washington D C, I think", ["Washington, D.C."])
    assert contains_gold("rogerio ceni", ["Rogério Ceni"])  # accents and case fold away
    assert contains_gold("BELGIUM.", ["France", "Belgium"])  # any gold answer counts
    assert not contains_gold("Belgiumland", ["Belgium"])  # whole words only
    assert not contains_gold("", ["Belgium"])


def test_overridden_slots_hold_the_values_their_last_value_replaced() -> None:
    slots = overridden(FACTS)
    assert slots[("ada_lovelace", "citizenship")] == ("Belgium", {" france "})
    # goalkeeper -> midfielder -> goalkeeper: only midfielder is stale now
    assert slots[("rogerio_ceni", "position_played")] == ("goalkeeper", {" midfielder "})
    assert ("france", "capital") not in slots  # never overridden


def test_stale_lines_count_a_slot_shown_with_a_value_it_overrode() -> None:
    slots = overridden(FACTS)
    assert stale_lines("ada_lovelace.citizenship = Belgium\nfrance.capital = Paris", slots) == 0
    assert stale_lines("ada_lovelace.citizenship = France\nrogerio_ceni.position_played = midfielder", slots) == 2
    # a disclosed earlier value after the current one is not the value shown
    assert stale_lines("ada_lovelace.citizenship = Belgium (was France)", slots) == 0
    assert stale_lines("France is where Ada Lovelace was a citizen", slots) == 0  # neither cell nor fact line
    # raw fact sentences, numbered or not, as plain RAG presents them
    assert stale_lines("3. Ada Lovelace is a citizen of France.\nAda Lovelace is a citizen of Belgium.", slots) == 1


def test_raw_top_k_presents_every_version_of_a_slot_and_counts_its_tokens() -> None:
    from pmem.adapters.embedders.hashing_embedder import HashingEmbedder

    raw = RawTopK(FACTS, HashingEmbedder())
    context, tokens = raw.read("Ada Lovelace is a citizen of which country?", k=2)
    assert set(context.splitlines()) == {FACTS[0], FACTS[2]} and tokens > 0
    assert stale_lines(context, overridden(FACTS)) == 1


def test_questions_load_by_hop_kind_and_bad_lines_name_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text('{"source": "factconsolidation_sh_6k", "question": "Q1?", "answers": ["a"]}\n\n'
                    '{"qa_pair_id": "factconsolidation_mh_6k_no0", "question": "Q2?", "answers": ["b"]}\n')
    qs = load_questions(path)
    assert [(q.question, q.multi) for q in qs] == [("Q1?", False), ("Q2?", True)]
    assert pick([*qs, Question("Q3?", ["c"], False)], 1) == qs
    assert pick(qs, None, "mh") == qs[1:] and pick(qs, None, "sh") == qs[:1]
    path.write_text('{"question": "no answers"}\n')
    with pytest.raises(SystemExit, match=r"q\.jsonl:1: not a question line"):
        load_questions(path)
    (tmp_path / "ctx.txt").write_text("no numbered facts here\n")
    with pytest.raises(SystemExit, match=r"ctx\.txt: no numbered facts"):
        load_facts(tmp_path / "ctx.txt")


def test_a_tally_row_reports_percentages_and_means() -> None:
    t = Tally(n=4, gold=3, tokens=100, stale=1, asked=2, right=1)
    assert t.row() == {"questions": 4, "gold in context %": 75.0, "tokens": 25.0, "stale presented": 1,
                       "answered %": 50.0, "answered": 2}
    assert Tally().row()["gold in context %"] == 0.0


def test_the_generated_stream_is_deterministic_by_seed() -> None:
    a, b = generate(800, seed=5, data=DATA), generate(800, seed=5, data=DATA)
    assert a.facts == b.facts and a.questions == b.questions and len(a.facts) == 800
    assert generate(800, seed=6, data=DATA).facts != a.facts


def test_generated_questions_ask_overridden_slots_and_chains_whose_gold_is_the_final_walk() -> None:
    stream = generate(2310, seed=1, data=DATA)
    chains = slot_chains(stream.facts)
    singles = [q for q in stream.questions if "_sh_" in q["qa_pair_id"]]
    multis = [q for q in stream.questions if "_mh_" in q["qa_pair_id"]]
    assert len(singles) == len(multis) == 40
    for q in singles:  # the later value is gold, and an earlier, different one was overridden
        slot = next(k for k, v in chains.items() if k[0] in q["question"] and v[-1] == q["answers"][0] and len(v) > 1)
        assert any(v != q["answers"][0] for v in chains[slot][:-1])
    for q in multis:
        node, rels = q["chain"]["start"], q["chain"]["relations"]
        edited = False
        for rel in rels:
            edited |= len(set(chains[(node, rel)])) > 1
            node = chains[(node, rel)][-1]
        assert node == q["answers"][0] and 2 <= len(rels) <= 4 and q["chain"]["start"] in q["question"]
        assert edited, q
    text = stream.context_text()
    assert text.startswith("Here is a list of facts:\n0. ") and json.dumps(stream.questions[0])
