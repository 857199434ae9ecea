"""P-Mem: Provenant Memory for LLM agents. The public API re-exported from its layers.

    import pmem
    with pmem.open("mem.db") as store:
        store.accept("5K PB", "27:12")
"""

from adapters.api import Store, open_store
from domain.errors import (
    ConflictRetriesExhausted,
    EmbedderBadResponse,
    EmbedderUnavailable,
    InvalidBatch,
    InvalidOperation,
    PmemError,
    StoreError,
    StoreUnavailable,
)
from domain.operations import Evidence, Operation, parse_operation
from domain.views import CellView, Head, History, Receipt, VersionView

open = open_store  # noqa: A001  (pmem.open(path) reads naturally; the builtin is untouched elsewhere)

__all__ = [
    "CellView", "ConflictRetriesExhausted", "EmbedderBadResponse", "EmbedderUnavailable",
    "Evidence", "Head", "History", "InvalidBatch",
    "InvalidOperation", "Operation", "PmemError", "Receipt", "Store", "StoreError", "StoreUnavailable",
    "VersionView", "open", "open_store", "parse_operation",
]
