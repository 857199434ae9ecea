"""The read path on a real SQLite store with the real ONNX embedder (SPEC §6): the context an agent
receives, its token budget, the iterative readout and turn pruning."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import pmem
from pmem.adapters.embedders.cache import CachedEmbedder, MemoryEmbeddingCache
from pmem.adapters.embedders.onnx_embedder import OnnxEmbedder
from pmem.adapters.service.reader import LOOKUP_CELLS, MAX_LOOKUPS, REFILL_FACTOR, Reader, TokenCounter
from pmem.domain.errors import InvalidOperation

EMBEDDER = CachedEmbedder(OnnxEmbedder(), MemoryEmbeddingCache())  # loads on first use, shared by the module


@pytest.fixture
def store(tmp_path: Path) -> Iterator[pmem.Store]:
    with pmem.open(tmp_path / "mem.db", embedder=EMBEDDER) as s:
        s.accept("5K PB", "27:12", source="coach", text="My 5K PB is 27:12.")
        s.accept("5K PB", "25:50", source="race", text="My 5K PB is now 25:50.")
        s.accept("home city", "Porto", text="I live in Porto.")
        s.accept("meeting room", "room A", text="The meeting is in room A.")
        s.contest("meeting room", "room B", text="Ben says the meeting is in room B.")
        for i in range(20):
            s.accept(f"colleague {i} team", f"team {i}", text=f"Colleague {i} works in team {i}.")
        yield s


class Scripted:
    """A lookup planner that asks the queries it was given, in order, then says enough (a real planner
    for tests: it plays the LLM's part without a model server)."""

    def __init__(self, queries: list[str]) -> None:
        self.queries, self.seen = list(queries), []

    def next_lookup(self, question: str, context: str) -> str | None:
        self.seen.append(context)
        return self.queries.pop(0) if self.queries else None


def test_a_cell_read_gives_the_current_value_and_never_the_superseded_one(store: pmem.Store) -> None:
    r = store.read("What is my 5K PB now?", k=3)
    assert r.context.splitlines()[0] == "5k_pb = 25:50"
    assert "27:12" not in r.context
    assert r.mode == "cells" and r.items[0] == "5k_pb" and len(r.items) == 3


def test_a_contested_cell_shows_both_claims_and_disclosure_shows_the_history(store: pmem.Store) -> None:
    r = store.read("Which room is the meeting in?", k=1)
    assert r.context == "meeting_room = room A (trust 50)  [contested: room B (trust 50)]"
    r = store.read("What is my 5K PB?", k=1, disclose=["history", "support"])
    assert r.context.splitlines() == ["5k_pb = 25:50", "  history: 27:12 (superseded)",
                                      "  support: 0 (trust 50, sources: race)"]


def test_the_budget_is_counted_in_real_tokens_and_both_sizes_are_reported(store: pmem.Store) -> None:
    count = TokenCounter()
    full = store.read("Which team does colleague 3 work in?", k=12)
    cut = store.read("Which team does colleague 3 work in?", k=12, budget=full.tokens // 2)
    assert cut.tokens <= full.tokens // 2 < full.tokens
    assert full.context.startswith(cut.context) and len(cut.items) < len(full.items)
    assert cut.tokens == count(cut.context) and cut.chars == len(cut.context)
    assert count("5k_pb = 25:50") == 9  # WordPiece: 5 ##k _ p ##b = 25 : 50


def test_the_iterative_readout_adds_at_most_three_lookups_of_six_new_cells(store: pmem.Store) -> None:
    planner = Scripted(["colleague team", "colleague team", "colleague team", "colleague team"])
    r = Reader(store, planner=planner).read_cells("What is my 5K PB?", k=2)
    assert len(r.lookups) == MAX_LOOKUPS and len(planner.queries) == 1
    assert len(r.items) == 2 + MAX_LOOKUPS * LOOKUP_CELLS == len(set(r.items))
    assert planner.seen[0] == "\n".join(r.context.splitlines()[:2])


def test_a_planner_that_is_satisfied_stops_the_readout(store: pmem.Store) -> None:
    r = Reader(store, planner=Scripted([])).read_cells("What is my 5K PB?", k=2)
    assert r.lookups == () and len(r.items) == 2


def test_a_turn_read_prunes_the_superseded_turn_only_for_a_current_value_question(store: pmem.Store) -> None:
    now = store.read("What is my 5K PB now?", mode="turns", k=4)
    assert "My 5K PB is now 25:50." in now.context and "27:12" not in now.context
    assert now.gated and now.pruned == ("1",)
    before = store.read("What was my 5K PB before?", mode="turns", k=4)
    assert "My 5K PB is 27:12." in before.context and before.pruned == () and not before.gated


def test_a_pruned_turn_gives_its_place_to_the_next_turn_in_rank(store: pmem.Store) -> None:
    r = store.read("What is my 5K PB now?", mode="turns", k=2)
    assert r.pruned == ("1",) and "27:12" not in r.context
    assert len(r.items) == 2 and r.context.splitlines()[0] == "race: My 5K PB is now 25:50."


def test_refilling_pruned_places_looks_a_bounded_way_down_the_ranking(tmp_path: Path) -> None:
    with pmem.open(tmp_path / "r.db", embedder=EMBEDDER) as s:
        for minute in range(30, 10, -1):  # twenty restatements, each displacing the one before
            s.accept("5K PB", f"{minute}:00", source="watch", text=f"My 5K PB is now {minute}:00.")
        r = s.read("What is my 5K PB now?", mode="turns", k=2)
    assert 0 < len(r.pruned) <= REFILL_FACTOR * 2 < 19  # not every stale turn was looked at
    assert 0 < len(r.items) <= 2 and "20" not in r.pruned  # event 20 holds the current value: never pruned


def test_turns_are_ranked_with_their_speaker(tmp_path: Path) -> None:
    """The question names the person: the turn that person said outranks the same words said by another."""
    with pmem.open(tmp_path / "t.db", embedder=EMBEDDER) as s:
        s.accept("ben.pet", "a dog", source="Ben", text="I have a dog.")
        s.accept("ana.pet", "a cat", source="Ana", text="I have a cat.")
        r = s.read("What pet does Ana have?", mode="turns", k=1)
    assert r.context == "Ana: I have a cat."


def test_reads_accept_as_of(store: pmem.Store) -> None:
    assert store.read("What is my 5K PB?", k=1, as_of=1).context == "5k_pb = 27:12"
    turn = store.read("What is my 5K PB?", mode="turns", k=1, as_of=1).context
    assert turn == "coach: My 5K PB is 27:12."  # a turn shows its source (who said it)


def test_bad_read_settings_are_named(store: pmem.Store) -> None:
    with pytest.raises(InvalidOperation, match="unknown read mode 'graph'"):
        store.read("x?", mode="graph")
    with pytest.raises(InvalidOperation, match="budget must be a positive"):
        store.read("x?", budget=0)
    with pytest.raises(InvalidOperation, match="unknown disclosure 'everything'"):
        store.read("x?", disclose=["everything"])
