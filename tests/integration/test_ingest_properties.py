"""Invariants of ingest, over random streams written through a real store (Hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import pmem
from pmem.adapters.service.ingest import Ingestor
from pmem.adapters.sources.records import read_records
from pmem.domain.extraction.cloze import TEMPLATES
from pmem.domain.extraction.facts import subject_key
from pmem.domain.extraction.template import TemplateExtractor
from tests.conftest import examples

SUBJECTS = ["Oslo", "Ada Lovelace", "São Paulo", "Apple Inc.", "Mount Fuji"]
OBJECTS = ["Paris", "Washington, D.C.", "the sea", "Bob", "1984"]
LOCATIONS = ["cabinet 1", "cabinet 2", "countertop 1", "drawer 3"]


def ingest(lines: list[str]) -> tuple[pmem.Store, list[dict[str, object]]]:
    store = pmem.open(":memory:")
    data = ("\n".join(lines) + "\n").encode()
    return store, list(Ingestor(store, TemplateExtractor()).run(read_records(data, "lines")))


@settings(max_examples=examples(40), deadline=None)
@given(st.lists(st.tuples(st.sampled_from(SUBJECTS), st.sampled_from(sorted(TEMPLATES)), st.sampled_from(OBJECTS)),
                min_size=1, max_size=40))
def test_a_cloze_stream_leaves_each_slot_holding_its_last_value(facts: list[tuple[str, str, str]]) -> None:
    lines = [f"{i}. {TEMPLATES[pid][0].replace('[X]', s).replace('__', o)}." for i, (s, pid, o) in enumerate(facts)]
    store, receipts = ingest(lines)
    last = {subject_key(s, TEMPLATES[pid][1]): o for s, pid, o in facts}
    assert {c.key: c.value for c in store.frontier()} == last
    assert all(r["applied"] for r in receipts) and len(receipts) == len(facts)
    store.close()


MOVE = st.tuples(st.just("move"), st.sampled_from(LOCATIONS))
RETRACT = st.tuples(st.just("retract"), st.sampled_from(LOCATIONS))


@settings(max_examples=examples(60), deadline=None)
@given(st.sampled_from(LOCATIONS), st.lists(st.one_of(MOVE, RETRACT), max_size=30))
def test_retracted_moves_reinstate_the_location_before_them(start: str, steps: list[tuple[str, str]]) -> None:
    """A stack is the reference: a move pushes (unless it names the current place), a retraction of the
    current place pops, a retraction of anything else changes nothing (a recorded noop)."""
    lines, stack, applied = [f"Earlier observation: mug 1 was in {start}."], [start], [True]
    for kind, loc in steps:
        here = stack[-1] if stack else "nowhere"
        if kind == "move":
            lines.append(f"Update: mug 1 has been moved from {here} to {loc}.")
            if not stack or stack[-1] != loc:
                stack.append(loc)
            applied.append(True)
        else:
            lines.append(f"The move of mug 1 to {loc} was reported in error.")
            applied.append(bool(stack) and stack[-1] == loc)
            if applied[-1]:
                stack.pop()
    store, receipts = ingest(lines)
    assert [r["applied"] for r in receipts] == applied
    assert store.get("mug 1.location").value == (stack[-1] if stack else None)
    store.close()
