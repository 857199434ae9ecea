"""Cell identity: key normalisation (docs/concepts.md) and the deterministic aggregate id.

Two editions of the key rule exist. Edition 2, the rule of every new store: Unicode NFKC, then
``casefold()``; every run of characters that are not letters, marks or digits of any script (Unicode
categories L*, M*, N*) and not ``.`` becomes ``_``; leading and trailing ``_`` removed. Edition 1, the
rule of stores created before it: ``[^a-z0-9.]+`` -> ``_`` after ``lower()``, which folded every
non-ASCII letter to ``_``. For ASCII input the two agree, so every key edition 1 ever stored is already
in edition-2 form. A store keeps the edition it was created with.
"""

from __future__ import annotations

import re
import unicodedata
import uuid
from functools import lru_cache
from hashlib import sha1

KEY_EDITION = 2  # the rule new stores use
KEY_EDITIONS = (1, 2)
_NON_KEY = re.compile(r"[^a-z0-9.]+")
_NAMESPACE_ROOT = uuid.UUID("6f1c2a4e-8d7b-5b1e-9c3a-2f0e4d6b8a10")


def normalize_key(raw: str, edition: int = KEY_EDITION) -> str:
    """``"5K PB"`` -> ``"5k_pb"``; ``"user.Home City"`` -> ``"user.home_city"``; ``"Größe"`` -> ``"grösse"``
    (edition 2) or ``"gr_e"`` (edition 1). May return ``""``."""
    if edition == 1 or raw.isascii():  # ASCII: both editions are this rule (and it is the fast path)
        return _NON_KEY.sub("_", raw.strip().lower()).strip("_")
    out: list[str] = []
    gap = False
    for ch in unicodedata.normalize("NFKC", raw).casefold():
        if ch == "." or unicodedata.category(ch)[0] in "LMN":
            if gap and out:
                out.append("_")
            out.append(ch)
            gap = False
        else:
            gap = True
    return "".join(out).strip("_")


_ROOT_BYTES = _NAMESPACE_ROOT.bytes
_UUID_NEW, _SET = uuid.UUID.__new__, object.__setattr__
_VERSION_5 = (0x5000 << 64) | (0x8000 << 48)  # version 5, RFC 4122 variant
_CLEAR = ~((0xF000 << 64) | (0xC000 << 48))


@lru_cache(maxsize=1 << 17)
def cell_id(namespace: str, key: str) -> uuid.UUID:
    """The aggregate id of the cell ``(namespace, key)``; ``key`` must already be normalised. (Cached:
    a ``uuid5`` is a SHA-1, and a write batch, a reload after a conflict and every read name the same
    cells again and again; a UUID is immutable, so sharing one is safe.)

    ``uuid.uuid5(root, namespace + "\x1f" + key)``, with the UUID made from its integer directly (a
    write of many new cells makes one each: the checks of ``UUID.__init__`` cost more than the SHA-1)."""
    digest = sha1(_ROOT_BYTES + f"{namespace}\x1f{key}".encode(), usedforsecurity=False).digest()
    out = _UUID_NEW(uuid.UUID)
    _SET(out, "int", int.from_bytes(digest[:16]) & _CLEAR | _VERSION_5)
    _SET(out, "is_safe", uuid.SafeUUID.unknown)
    return out
