"""What the integrations need of a store: the methods of ``pmem.Store`` they call, as a protocol, so a
local store (``pmem.open``) and a remote one with the same methods both fit."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from pmem.domain.keys import normalize_key
from pmem.domain.views import CellView, History, Receipt


class Found(Protocol):
    """One result of ``store.search``."""

    @property
    def cell(self) -> CellView: ...

    @property
    def score(self) -> float: ...


class StoreLike(Protocol):
    """The part of ``pmem.Store``'s API the integrations use (docs/python-api.md)."""

    def apply(self, operations: Iterable[Any]) -> list[Receipt]: ...

    def get(self, key: str, *, as_of: int | None = None, disclose: Iterable[str] = (),
            namespace: str | None = None) -> CellView: ...

    def get_many(self, keys: Iterable[str], *, namespace: str | None = None) -> dict[str, CellView]: ...

    def frontier(self, *, as_of: int | None = None, disclose: Iterable[str] = (), namespace: str | None = None,
                 system: bool = False, after: str | None = None, limit: int | None = None) -> list[CellView]: ...

    def history(self, key: str, *, as_of: int | None = None, namespace: str | None = None) -> History: ...

    def search(self, query: str, k: int = ..., *, as_of: int | None = None, namespace: str | None = None,
               system: bool = False, ranking: str = ...) -> Sequence[Found]: ...

    def last_index(self) -> int: ...

    def close(self) -> None: ...


def revokes_to_empty(history: History) -> int:
    """How many ``revoke``s leave the cell empty: each retracts the head and reinstates the value it
    displaced, so every version still active or superseded comes back once before the cell empties."""
    return sum(v.status in ("active", "superseded", "contested") for v in history.versions)


def page_through(store: StoreLike, namespace: str | None, after: str | None = None,
                 page: int = 500) -> Iterable[CellView]:
    """Every non-empty cell of ``namespace`` whose key sorts after ``after``, a page of keys at a time."""
    while True:
        cells = store.frontier(namespace=namespace, after=after, limit=page)
        yield from cells
        if len(cells) < page:
            return
        after = cells[-1].key


def label(part: str) -> str:
    """One part of a cell key: the part itself when it already is a normalised key part (ASCII letters,
    digits and ``_``), else its normalised form plus 8 hex digits of its hash, so no two parts share a key
    (``"Alice"`` and ``"alice"`` differ)."""
    plain = normalize_key(part, 1).replace(".", "_")
    if plain == part:
        return part
    return f"{plain or 'x'}_{hashlib.sha256(part.encode()).hexdigest()[:8]}"
