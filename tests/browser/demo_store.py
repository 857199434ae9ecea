"""The store the browser tests and ``scripts/inspector_screenshots.py`` inspect: the operations of ``pmem demo``
(adapters/entrypoints/demo.py, scenes 1-5, in order) followed by docs/graph-example.jsonl (a small entity
graph: Dickens, a superseded author, a contested spouse), so the graph view has neighbours to open."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path

from pmem.adapters.entrypoints import demo
from pmem.adapters.service.store import open_store

GRAPH_EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "graph-example.jsonl"


@dataclass(frozen=True)
class DemoStore:
    db: str
    raised_at: int  # the event that raised the budget to $50k
    contested_at: int  # the event that contested the meeting room (before it was resolved)
    last: int


def build(db: str) -> DemoStore:
    """Write the demo's operations, then the graph example, into a fresh store at ``db``."""
    with open_store(db, embedder="hashing") as store:
        n = demo._Narrator(store, io.StringIO())  # the demo's own scenes, their narration discarded
        demo.personal_best(n)
        raised_at = demo.budget(n)
        demo.meeting_room(n)
        demo.revision_chain(n)
        demo.poisoning(n)
        store.apply([json.loads(line) for line in GRAPH_EXAMPLE.read_text().splitlines() if line.strip()])
        contested_at = next(e["event_index"] for e in store.log() if e["key"] == "meeting_room"
                            and e["op"] == "contest")
        return DemoStore(db, raised_at, contested_at, store.last_index())
