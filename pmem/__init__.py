"""P-Mem: Provenant Memory for LLM agents. The public API re-exported from its layers.

    import pmem
    with pmem.open("mem.db") as store:
        store.accept("5K PB", "27:12")

The layers install inside this package: ``pmem.domain`` (the rules), ``pmem.projections`` (pure read
models) and ``pmem.adapters`` (storage, search, services, entry points); see docs/architecture.md.
``Store`` is imported on first use, so ``import pmem`` (and the CLI that imports it) stays light.
"""

from __future__ import annotations

import os as _os
from typing import TYPE_CHECKING, Any

# In a source checkout the layers sit beside this folder (<root>/domain, ...), not inside it: only
# setuptools' package-dir mapping puts them into the package, when it installs it. Python puts the working
# directory (or a script's folder) first on sys.path, so from the repository root this folder is `pmem`
# even when a built copy is installed, and `pmem.domain` would be looked for in <root>/pmem alone and not
# found. Searching the root too makes the checkout one whole package, every module from the same tree.
# An installed copy holds its layers inside this folder and is left alone; under the editable install,
# `pmem.domain` is <root>/domain either way.
_here = _os.path.dirname(_os.path.abspath(__file__))
_root = _os.path.dirname(_here)
_beside = _os.path.isfile(_os.path.join(_root, "domain", "__init__.py"))
if _beside and not _os.path.isdir(_os.path.join(_here, "domain")):
    __path__.append(_root)
del _here, _root, _beside

from pmem.domain.errors import (  # noqa: E402 (the search path above must be set first)
    ConflictRetriesExhausted,
    DeadlinePassed,
    EmbedderBadResponse,
    EmbedderUnavailable,
    Forbidden,
    InvalidBatch,
    InvalidOperation,
    LimitExceeded,
    MissingExtra,
    NotServed,
    PmemError,
    ProjectionStopped,
    RetryConflict,
    StoreClosed,
    StoreError,
    StoreUnavailable,
    Unauthorized,
)
from pmem.domain.operations import Evidence, Operation, parse_operation  # noqa: E402
from pmem.domain.views import CellView, Head, History, Receipt, VersionView  # noqa: E402

if TYPE_CHECKING:
    from pmem.adapters.client.async_remote import AsyncRemoteStore, connect_async
    from pmem.adapters.client.remote import RemoteStore, connect
    from pmem.adapters.service.store import Store, open_store

    open = open_store  # noqa: A001

# name -> (module, attribute), imported on first use
_LAZY = {"Store": ("pmem.adapters.service.store", "Store"),
         "open_store": ("pmem.adapters.service.store", "open_store"),
         "open": ("pmem.adapters.service.store", "open_store"),
         "connect": ("pmem.adapters.client.remote", "connect"),
         "RemoteStore": ("pmem.adapters.client.remote", "RemoteStore"),
         "connect_async": ("pmem.adapters.client.async_remote", "connect_async"),
         "AsyncRemoteStore": ("pmem.adapters.client.async_remote", "AsyncRemoteStore")}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attribute = _LAZY[name]
        return getattr(importlib.import_module(module), attribute)
    raise AttributeError(f"module 'pmem' has no attribute {name!r}")


__all__ = [
    "AsyncRemoteStore", "CellView", "ConflictRetriesExhausted", "DeadlinePassed", "EmbedderBadResponse",
    "EmbedderUnavailable", "Evidence", "Forbidden", "Head", "History", "InvalidBatch", "InvalidOperation",
    "LimitExceeded", "MissingExtra", "NotServed", "Operation", "PmemError", "ProjectionStopped", "Receipt",
    "RetryConflict",
    "RemoteStore", "Store", "StoreClosed", "StoreError", "StoreUnavailable", "Unauthorized",
    "VersionView", "connect", "connect_async", "open", "open_store", "parse_operation",
]
