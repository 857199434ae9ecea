"""The plain-SQL view of the log (pmem.adapters.eventstore.stored_log) agrees with eventsourcing's own."""

from __future__ import annotations

from pathlib import Path

import pmem
from pmem.adapters.embedders.hashing_embedder import HashingEmbedder
from pmem.adapters.eventstore.codec import CLASS_VERSION, OP_BY_TOPIC
from pmem.adapters.eventstore.stored_log import EVENTS_TABLE, event_dict, object_dict
from pmem.adapters.readmodels.tracked_projection import TRACKING, tracked_position
from pmem.adapters.readmodels.vector_projection import OLD_POSITION_TABLE
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
    rows = store._events.rows(1, None, 100)
    decoded = list(store.log_store.indexed_events())
    assert [event_dict(r, store._events.keys) for r in rows] == [object_dict(i, e) for i, e in decoded]
    assert store.last_index() == store.log_store.last_index() == 5


def test_the_vector_position_is_kept_in_the_tracking_table_every_projection_shares(db: str) -> None:
    with pmem.open(db, embedder=HashingEmbedder()) as store:
        assert tracked_position(store.projection_db, "vectors") == 0
        store.accept("a", "1")
        store.search("a")
        assert tracked_position(store.projection_db, "vectors") == store.vector_search().projection.position() == 1
        assert store.stats()["projections"]["vectors"] == {"position": 1, "lag": 0}


def test_a_store_with_the_old_vector_position_table_carries_its_position_over(db_path: Path) -> None:
    with pmem.open(db_path, embedder=HashingEmbedder()) as store:
        store.accept("a", "1")
        store.search("a")
        db = store.projection_db
        db.execute(f"CREATE TABLE {OLD_POSITION_TABLE} (name TEXT PRIMARY KEY, position INTEGER NOT NULL)")
        db.execute(f"INSERT INTO {OLD_POSITION_TABLE} VALUES ('vectors', 1)")
        db.execute(f"DELETE FROM {TRACKING} WHERE name='vectors'")
    with pmem.open(db_path, embedder=HashingEmbedder()) as store:
        assert store.stats()["projections"]["vectors"] == {"position": 0, "lag": 1}  # stats writes nothing
        assert store.vector_search().projection.position() == 1
        assert OLD_POSITION_TABLE not in store.projection_db.names()
        assert [r.cell.key for r in store.search("a")] == ["a"]
