"""Facts about a store itself, kept in its database beside the log: which key edition it uses.

One row per fact in ``pmem_meta``; the first writer wins, so two processes creating the same store
agree. A store created before this table existed has none: if it holds events, it was written under
key edition 1 and keeps that rule; an empty store takes the current edition.
"""

from __future__ import annotations

from typing import Any

from pmem.domain.keys import KEY_EDITION

META = "pmem_meta"
WRITE_LOCK = "projections"  # the lock every projection write takes (see readmodels.tracked_projection)


def read_meta(db: Any, name: str) -> str | None:
    """The stored value of ``name``, or None (also when the table does not exist yet)."""
    if META not in db.names():
        return None
    row = db.execute(f"SELECT value FROM {META} WHERE name=?", (name,)).fetchone()
    return None if row is None else str(row[0])


def write_meta(db: Any, name: str, value: str) -> str:
    """Store ``value`` for ``name`` unless one is stored already; return the stored one."""
    with db.write(WRITE_LOCK):
        db.execute(f"CREATE TABLE IF NOT EXISTS {META} (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute(f"INSERT INTO {META} VALUES (?, ?) ON CONFLICT DO NOTHING", (name, value))
    return read_meta(db, name) or value


def key_edition(db: Any, has_events: bool) -> int:
    """The key edition of the store on ``db``: the stored one; else 1 for a store that already holds
    events (written before editions were recorded); else the current edition, recorded now (a store
    that cannot be written, read-only say, just answers it)."""
    stored = read_meta(db, "key_edition")
    if stored is not None:
        return int(stored)
    if has_events:
        return 1
    try:
        return int(write_meta(db, "key_edition", str(KEY_EDITION)))
    except db.errors:
        return KEY_EDITION
