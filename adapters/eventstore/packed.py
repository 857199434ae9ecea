"""Folds a streamed resend keeps between its chunks as bytes instead of objects (docs/decisions.md).

A resent operation's receipt needs its cell folded up to the event it became; a fold kept here (its
state packed by :meth:`CellState.packed`, marshalled: a fifth of its objects' memory) lets a later
chunk go on from where it stopped, up to ``limit`` bytes. Past it, the folds packed longest ago are
dropped, down to three quarters of it (one taken and put again moves to the end), and are folded again
when needed. The bytes are valid only inside the batch that packed them: it holds the write lock, so
nothing else changes the cells.
"""

from __future__ import annotations

import marshal
from collections.abc import Hashable
from typing import Any

ENTRY = 120  # what an entry's dict slot and key cost beside its bytes


class PackedCells:
    """``key -> value`` (plain tuples, as marshal takes them), counted in bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit  # 0: nothing is kept
        self.size = 0
        self._items: dict[Hashable, bytes] = {}

    def __len__(self) -> int:
        return len(self._items)

    def put(self, key: Hashable, value: tuple[Any, ...]) -> None:
        if self.limit <= 0:
            return
        packed = marshal.dumps(value)
        old = self._items.pop(key, None)
        if old is not None:
            self.size -= len(old) + ENTRY
        self._items[key] = packed
        self.size += len(packed) + ENTRY

    def take(self, key: Hashable) -> tuple[Any, ...] | None:
        """The value kept for ``key``, no longer kept; None if there is none."""
        packed = self._items.pop(key, None)
        if packed is None:
            return None
        self.size -= len(packed) + ENTRY
        value: tuple[Any, ...] = marshal.loads(packed)
        return value

    def fullness(self) -> float:
        """The share of ``limit`` in use, at most 1."""
        return min(1.0, self.size / self.limit) if self.limit > 0 else 1.0

    def bound(self) -> None:
        """Past ``limit``, drop the entries put longest ago down to three quarters of it."""
        if self.size <= self.limit:
            return
        down_to = self.limit * 3 // 4
        for key in list(self._items):
            if self.size <= down_to:
                return
            self.size -= len(self._items.pop(key)) + ENTRY

    def clear(self) -> None:
        self._items.clear()
        self.size = 0
