"""Hypothesis drives random operations of every kind against a real store (a SQLite file, and a
PostgreSQL schema) and the independent reference model (edition 2: Unicode keys, trust guarding every
version an operation would close); after every step they must agree (docs/concepts.md).
PostgreSQL runs fewer examples: each step is a round trip to the server, much slower than a local file."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

import pmem
from tests.conftest import Backend, examples
from tests.reference_model import RefStore

EXAMPLES = {"sqlite": 150, "postgres": 15}

# Edition-2 keys: spellings of one key in several scripts and Unicode forms land in one cell.
KEYS = {"5K PB": "5k_pb", "5k pb": "5k_pb", "budget": "budget", "Meeting Room": "meeting_room",
        "Zürich": "zürich", "Zu\u0308rich": "zürich", "GRÖSSE": "grösse", "Größe": "grösse",
        "東京": "東京", "ＡＢＣ": "abc", "abc": "abc"}
VALUES = st.sampled_from(["a", "b", "c"])
MAYBE_VALUE = st.one_of(st.none(), VALUES)
TRUST = st.sampled_from([30, 50, 50, 80])
OPS = st.sampled_from(["accept", "contest", "reject", "revoke", "resolve", "support"])


def operation(op: str, key: str, value: str | None, trust: int) -> dict[str, Any]:
    d: dict[str, Any] = {"op": op, "key": key, "trust": trust, "source": f"s{trust}"}
    if value is not None:
        d["value"] = value
    return d


class StoreAgreesWithModel(RuleBasedStateMachine):
    """One run: a new, empty store named by ``new_url()``, reopened by name as a new process would."""

    def __init__(self, new_url: Callable[[], str]) -> None:
        super().__init__()
        self.url = new_url()
        self.store = pmem.open(self.url)
        self.model = RefStore()
        self.events = 0

    def teardown(self) -> None:
        self.store.close()

    def _check_receipt(self, r: pmem.Receipt, key: str, expected: tuple[bool, str]) -> None:
        self.events += 1
        assert r.event_index == self.events  # one event per operation, indices dense from 1
        assert r.key == KEYS[key]
        assert (r.applied, r.op) == expected, r
        value, status, _ = self.model.cells[KEYS[key]].view()
        assert (None if r.head is None else (r.head.value, r.head.status)) == (
            None if value is None else (value, status))

    @rule(key=st.sampled_from(sorted(KEYS)), op=OPS, value=VALUES, trust=TRUST)
    def operation_with_value(self, key: str, op: str, value: str, trust: int) -> None:
        r = getattr(self.store, op)(key, value, trust=trust, source=f"s{trust}")
        self._check_receipt(r, key, self.model.apply(KEYS[key], op, value, trust))

    @rule(key=st.sampled_from(sorted(KEYS)), op=st.sampled_from(["reject", "revoke", "support"]), trust=TRUST)
    def operation_without_value(self, key: str, op: str, trust: int) -> None:
        r = getattr(self.store, op)(key, trust=trust)
        self._check_receipt(r, key, self.model.apply(KEYS[key], op, None, trust))

    @rule(key=st.sampled_from(sorted(KEYS)), new=VALUES, old=MAYBE_VALUE, correction=st.booleans(),
          hard=st.booleans(), trust=TRUST)
    def revise(self, key: str, new: str, old: str | None, correction: bool, hard: bool, trust: int) -> None:
        r = self.store.revise(key, new, old_value=old, status="correction" if correction else "update",
                              hard_commit=hard, trust=trust)
        expected = self.model.apply(KEYS[key], "revise", new, trust, old_value=old, correction=correction,
                                    hard_commit=hard)
        self._check_receipt(r, key, expected)

    @rule(batch=st.lists(st.tuples(st.sampled_from(sorted(KEYS)), OPS, MAYBE_VALUE, TRUST), min_size=1, max_size=6))
    def atomic_batch(self, batch: list[tuple[str, str, str | None, int]]) -> None:
        ops = [operation(op, key, value, trust) for key, op, value, trust in batch
               if value is not None or op in ("reject", "revoke", "support")]
        if not ops:
            return
        receipts = self.store.apply(ops)
        assert len(receipts) == len(ops)
        for d, r in zip(ops, receipts, strict=True):
            expected = self.model.apply(KEYS[d["key"]], d["op"], d.get("value"), d["trust"])
            self.events += 1
            assert r.event_index == self.events and (r.applied, r.op) == expected, (d, r)

    @precondition(lambda self: self.events > 0)
    @rule()
    def close_and_reopen(self) -> None:
        self.store.close()
        self.store = pmem.open(self.url)

    @invariant()
    def head_status_and_alternatives_agree(self) -> None:
        got = {c.key: (c.value, c.status, list(c.alternatives)) for c in self.store.frontier()}
        assert got == self.model.frontier()

    @invariant()
    def every_cell_has_at_most_one_head(self) -> None:
        for key in self.model.cells:
            heads = [v for v in self.store.history(key).versions if v.status in ("active", "contested")]
            assert len(heads) <= 1


def test_random_operations_on_a_store_agree_with_the_reference_model_after_every_step(backend: Backend) -> None:
    run_state_machine_as_test(lambda: StoreAgreesWithModel(backend.new_url),
                              settings=settings(max_examples=examples(EXAMPLES[backend.name]), stateful_step_count=40,
                                                deadline=None))
