"""Pure validation and key normalisation (no I/O)."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pmem.domain.errors import InvalidOperation
from pmem.domain.keys import cell_id, normalize_key
from pmem.domain.operations import Evidence, Operation, parse_operation


@pytest.mark.parametrize(("raw", "key"), [("5K PB", "5k_pb"), ("user.Home City", "user.home_city"),
                                          ("  --Budget!! ", "budget"), ("a..b", "a..b"),
                                          ("Ünïcode key", "ünïcode_key")])
def test_keys_normalise_as_the_concepts_say(raw: str, key: str) -> None:
    assert normalize_key(raw) == key


@given(st.text())
def test_normalising_twice_changes_nothing(raw: str) -> None:
    k, k1 = normalize_key(raw), normalize_key(raw, 1)
    assert normalize_key(k) == k and all(c.isalnum() or c in "._" or unicodedata.category(c)[0] == "M" for c in k)
    assert normalize_key(k1, 1) == k1 and all(c.isascii() and (c.isalnum() or c in "._") for c in k1)


def test_cell_ids_are_deterministic_and_separate_namespaces() -> None:
    assert cell_id("default", "k") == cell_id("default", "k") != cell_id("other", "k")


@given(st.text(), st.text())
def test_a_cell_id_is_the_uuid5_of_its_namespace_and_key(namespace: str, key: str) -> None:
    import pickle
    import uuid

    from pmem.domain.keys import _NAMESPACE_ROOT

    made, want = cell_id.__wrapped__(namespace, key), uuid.uuid5(_NAMESPACE_ROOT, f"{namespace}\x1f{key}")
    assert (made, made.hex, hash(made), made.version, made.variant) == (want, want.hex, hash(want), 5, want.variant)
    assert pickle.loads(pickle.dumps(made)) == want and str(made) == str(want)


def test_a_parsed_operation_carries_its_evidence() -> None:
    op = parse_operation({"op": "accept", "key": "5K PB", "value": "25:50", "source": "race", "trust": 80,
                          "text": "ran 25:50", "op_id": "m1", "observed_at": "2026-05-01T10:00:00Z"})
    assert op == Operation("accept", "default", "5k_pb", "25:50",
                           Evidence("ran 25:50", "race", 80, "2026-05-01T10:00:00Z", "m1"))


def test_a_node_type_travels_with_the_evidence_and_defaults_to_none() -> None:
    op = parse_operation({"op": "contest", "key": "ada.spouse", "value": "Charles", "node_type": "relationship"})
    assert op.evidence.node_type == "relationship"
    assert parse_operation({"op": "accept", "key": "k", "value": "v"}).evidence.node_type is None
    with pytest.raises(InvalidOperation, match="'node_type' must be one of event, persona, relationship, got 'place'"):
        parse_operation({"op": "accept", "key": "k", "value": "v", "node_type": "place"})


def test_values_are_stored_verbatim() -> None:
    assert parse_operation({"op": "accept", "key": "k", "value": "  Mixed Case  "}).value == "  Mixed Case  "


@pytest.mark.parametrize(("d", "field"), [
    ({"op": "accept", "key": "k", "value": "v", "trust": -1}, "trust"),
    ({"op": "accept", "key": "k", "value": "v", "trust": 5.5}, "trust"),
    ({"op": "accept", "key": "k", "value": ""}, "value"),
    ({"op": "accept", "key": "k", "value": "a\ud800b"}, "value"),
    ({"op": "revise", "key": "k", "new_value": "v", "status": "maybe"}, "status"),
    ({"op": "revise", "key": "k", "new_value": "v", "hard_commit": "yes"}, "hard_commit"),
    ({"op": "accept", "key": "k", "value": "v", "source": 3}, "source"),
    ({"op": "accept", "key": 7, "value": "v"}, "key"),
    ({"op": "accept", "key": "k", "value": "v", "node_type": "place"}, "node_type"),
    ({"op": "accept", "key": "k", "value": "v", "node_type": 1}, "node_type"),
])
def test_bad_fields_are_named(d: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidOperation) as e:
        parse_operation(d)
    assert e.value.field == field and field in str(e.value)


def test_value_is_optional_where_the_spec_allows_it() -> None:
    for op in ("reject", "revoke", "support"):
        assert parse_operation({"op": op, "key": "k"}).value is None
