"""The compact form of a cell's state (``CellState.packed``): what a streamed batch keeps of the cells it
no longer holds as objects must give back the same state, whatever operations made it."""

from __future__ import annotations

import marshal
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from pmem.domain.cell import MemoryCell
from pmem.domain.decide import decide
from pmem.domain.errors import InvalidOperation
from pmem.domain.operations import parse_operation
from pmem.domain.state import CellState

NOW = datetime(2026, 1, 1, tzinfo=UTC)
OPS = ("accept", "contest", "reject", "revoke", "resolve", "support")
op_lines = st.lists(st.tuples(st.sampled_from(OPS), st.sampled_from(["a", "b", "c", "ünï", None]),
                              st.sampled_from([10, 50, 90]), st.sampled_from(["s1", "s2", None]),
                              st.sampled_from([None, "event", "persona"])), max_size=25)


def fold(ops: list[tuple[str, str | None, int, str | None, str | None]], forget_at: int | None = None) -> CellState:
    cell = MemoryCell.new("default", "k", NOW)
    for i, (op, value, trust, source, node_type) in enumerate(ops):
        if i == forget_at:
            cell.state.forget(cell.version + 1)
            cell.version += 1
        given_ = {"value": value, "source": source, "node_type": node_type}
        d = {"op": op, "key": "k", "trust": trust, **{k: v for k, v in given_.items() if v is not None}}
        try:
            operation = parse_operation(d)
        except InvalidOperation:  # an operation that needs a value and has none
            continue
        event_class, fields = decide(cell.state, operation)
        cell.record(event_class, NOW, fields)
    return cell.state


@given(op_lines, st.none() | st.integers(0, 25))
def test_a_packed_state_unpacks_equal_to_itself_through_marshal(ops: list, forget_at: int | None) -> None:
    state = fold(ops, forget_at)
    back = CellState.unpacked(marshal.loads(marshal.dumps(state.packed())))
    assert back == state
    assert [v.status for v in back.versions] == [v.status for v in state.versions]


def test_an_unpacked_state_shares_no_list_with_the_packed_one() -> None:
    state = fold([("accept", "a", 50, "s1", None), ("contest", "b", 50, "s2", None), ("support", "a", 90, "s2", None)])
    back = CellState.unpacked(state.packed())
    back.versions[0].evidence.append(99)
    back.versions[0].sources.append("s9")
    back.alternative_vids.append(7)
    assert back.versions[0].evidence != state.versions[0].evidence
    assert state.alternative_vids == [1] and state.versions[0].sources == ["s1", "s2"]
