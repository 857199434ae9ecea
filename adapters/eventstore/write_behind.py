"""A streamed batch's cell records and new data keys, held back and written sorted, once per cell.

A batch streamed in chunks is one transaction, so what it writes beside its events need only be in
place by the commit. Written chunk by chunk, the records of a batch over many keys cost one upsert per
cell per chunk, each at a random place of a table far bigger than the page cache: SQLite then spills
dirty pages to the WAL and writes them again. Held back, a cell touched in many chunks is written once,
and a flush writes its rows in primary-key order, each page of the tables touched once, in order
(docs/decisions.md, "A compact cell state beside the log").

While rows are held, the batch must find them without the tables: every held record is also among the
batch's state records (``EventLog._stream_states``, flushed before those are let go), and a held key is
looked up here (:meth:`WriteBehind.key`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pmem.adapters.eventstore.cell_state import StateRow, StateWrites
from pmem.adapters.eventstore.log_access import KeyRow


class WriteBehind:
    """Records and data keys a streamed batch has written but not yet stored, by cell id hex."""

    def __init__(self) -> None:
        self.states: dict[str, StateRow] = {}
        self.keys: dict[str, tuple[int, bytes]] = {}

    def __len__(self) -> int:
        return len(self.states)

    def hold(self, states: Iterable[StateRow], keys: Iterable[KeyRow]) -> None:
        """Hold a chunk's records (a cell's later record replaces its earlier one) and new keys."""
        for row in states:
            self.states[row[0]] = row
        for cell, life, raw in keys:
            self.keys[cell] = (life, raw)

    def key(self, cell: str) -> tuple[int, bytes] | None:
        """The held new key of ``cell`` (its life and bytes), if any."""
        return self.keys.get(cell)

    def flush(self, recorder: Any) -> None:
        """Store what is held, in the recorder's open batch, sorted by cell id; hold nothing after."""
        if self.states or self.keys:
            keys = sorted((cell, life, raw) for cell, (life, raw) in self.keys.items())
            recorder.write_held(keys, StateWrites(sorted(self.states.values()), [], [], []))
        self.clear()

    def clear(self) -> None:
        self.states.clear()
        self.keys.clear()
