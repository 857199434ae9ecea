"""The stored shape of cell events, without the event classes: topics, the current class version and
the upcasters that bring an older stored event to it.

Topics are explicit and stable (``pmem.cell/<Name>``), so moving or renaming a class never breaks
replay. This module imports nothing heavy, so the raw log reader (``pmem log``) and the codec use it
without loading ``eventsourcing``; :mod:`pmem.domain.cell` builds its classes on it, and a test checks
the two agree.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

CLASS_VERSION = 2  # 2: ``node_type`` added
OP_BY_TOPIC = {
    "pmem.cell/Accepted": "accept", "pmem.cell/Contested": "contest", "pmem.cell/Rejected": "reject",
    "pmem.cell/Revoked": "revoke", "pmem.cell/Resolved": "resolve", "pmem.cell/Supported": "support",
    "pmem.cell/NotApplied": "noop", "pmem.cell/Forgotten": "forget",
}


def upcast_v1_v2(state: dict[str, Any]) -> None:
    """A version-1 event (stored before node types existed) supplied none."""
    state["node_type"] = None


UPCASTERS: dict[int, Callable[[dict[str, Any]], None]] = {1: upcast_v1_v2}  # from version N to N + 1


def upcast(state: dict[str, Any], version: int) -> dict[str, Any]:
    """``state``, stored at class ``version``, brought to :data:`CLASS_VERSION` in place."""
    while version < CLASS_VERSION:
        UPCASTERS[version](state)
        version += 1
    return state
