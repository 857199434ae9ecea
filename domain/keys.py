"""Cell identity: key normalisation (docs/concepts.md) and the deterministic aggregate id."""

from __future__ import annotations

import re
import uuid

_NON_KEY = re.compile(r"[^a-z0-9.]+")
_NAMESPACE_ROOT = uuid.UUID("6f1c2a4e-8d7b-5b1e-9c3a-2f0e4d6b8a10")


def normalize_key(raw: str) -> str:
    """``"5K PB"`` -> ``"5k_pb"``; ``"user.Home City"`` -> ``"user.home_city"``. May return ``""``."""
    return _NON_KEY.sub("_", raw.strip().lower()).strip("_")


def cell_id(namespace: str, key: str) -> uuid.UUID:
    """The aggregate id of the cell ``(namespace, key)``; ``key`` must already be normalised."""
    return uuid.uuid5(_NAMESPACE_ROOT, f"{namespace}\x1f{key}")
