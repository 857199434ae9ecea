"""The plain-SQL view of the log (pmem.adapters.eventstore.stored_log) agrees with eventsourcing's own."""

from __future__ import annotations

from pathlib import Path

import pmem
from pmem.adapters.embedders.hashing_embedder import HashingEmbedder
from pmem.adapters.eventstore.stored_log import CLASS_VERSION, EVENTS_TABLE, OP_BY_TOPIC, event_dict, object_dict
from pmem.adapters.readmodels.vector_projection import stored_position
from pmem.adapters.service.store import _vector_position
from pmem.domain.cell import EVENT_CLASSES


def test_the_topic_table_names_every_event_class_with_its_op_and_current_version() -> None:
    assert OP_BY_TOPIC == {c.TOPIC: c.OP for c in EVENT_CLASSES}
    assert {c.class_version for c in EVENT_CLASSES} == {CLASS_VERSION}


def test_the_events_table_is_the_one_the_sqlite_recorder_writes(db_path: Path) -> None:
    """The plain-SQL view is used on SQLite files only (pmem.adapters.storage.backend: ``lazy_log``)."""
    with pmem.open(db_path) as store:
        assert store.backend.lazy_log and store._events is not store.log_store
        assert store.log_store.recorder.events_table_name == EVENTS_TABLE


def test_raw_rows_give_the_same_dicts_and_last_index_as_decoded_events(store: pmem.Store) -> None:
    store.accept("a", "1", source="s", trust=70)
    store.contest("a", "2", text="t")
    store.revoke("a", "2")
    store.apply([{"op": "support", "key": "a", "op_id": "o"}, {"op": "reject", "key": "b"}])
    rows = store._log_rows(1, None, 100)
    decoded = list(store.log_store.indexed_events())
    assert [event_dict(r) for r in rows] == [object_dict(i, e) for i, e in decoded]
    assert store.last_index() == store.log_store.last_index() == 5


def test_stats_reads_the_vector_position_the_vector_projection_stores(db: str) -> None:
    with pmem.open(db, embedder=HashingEmbedder()) as store:
        assert _vector_position(store.projection_db) == stored_position(store.projection_db) == 0
        store.accept("a", "1")
        store.search("a")
        assert _vector_position(store.projection_db) == stored_position(store.projection_db) == 1
        assert store.stats()["projections"]["vectors"] == {"position": 1, "lag": 0}
