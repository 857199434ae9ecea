"""P-Mem: Provenant Memory for LLM agents. The public API re-exported from its layers.

    import pmem
    with pmem.open("mem.db") as store:
        store.accept("5K PB", "27:12")

The layers install inside this package: ``pmem.domain`` (the rules), ``pmem.projections`` (pure read
models) and ``pmem.adapters`` (storage, search, services, entry points); see docs/architecture.md.
``Store`` is imported on first use, so ``import pmem`` (and the CLI that imports it) stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pmem.domain.errors import (
    ConflictRetriesExhausted,
    EmbedderBadResponse,
    EmbedderUnavailable,
    Forbidden,
    InvalidBatch,
    InvalidOperation,
    MissingExtra,
    PmemError,
    ProjectionStopped,
    RetryConflict,
    StoreClosed,
    StoreError,
    StoreUnavailable,
    Unauthorized,
)
from pmem.domain.operations import Evidence, Operation, parse_operation
from pmem.domain.views import CellView, Head, History, Receipt, VersionView

if TYPE_CHECKING:
    from pmem.adapters.service.store import Store, open_store

    open = open_store  # noqa: A001

_LAZY = {"Store": "Store", "open_store": "open_store", "open": "open_store"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from pmem.adapters.service import store

        return getattr(store, _LAZY[name])
    raise AttributeError(f"module 'pmem' has no attribute {name!r}")


__all__ = [
    "CellView", "ConflictRetriesExhausted", "EmbedderBadResponse", "EmbedderUnavailable",
    "Evidence", "Forbidden", "Head", "History", "InvalidBatch",
    "InvalidOperation", "MissingExtra", "Operation", "PmemError", "ProjectionStopped", "Receipt", "RetryConflict",
    "Store", "StoreClosed", "StoreError", "StoreUnavailable", "Unauthorized",
    "VersionView", "open", "open_store", "parse_operation",
]
