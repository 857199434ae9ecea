"""``pmem migrate keys``: a store of key edition 1 moves to edition 2 (docs/concepts.md, key editions).

Every key edition 1 stored is ASCII and already an edition-2 key, and the raw spellings were never
stored, so the switch itself changes no cell: from the event index it is recorded at (``pmem_meta``:
``key_edition`` 2 and ``key_edition_since``), keys are normalised by edition 2, and a read ``as_of`` an
earlier index by edition 1, so it reads exactly the old state. What the switch cannot know is which
cells the user meant by a non-ASCII spelling (``Größe`` was stored as ``gr_e``). Given raw spellings
(one per line), each whose edition-1 key holds a cell and differs from its edition-2 key is re-keyed
**as events**: the new key receives the old cell's head and open alternatives, the old cell's open
versions are revoked, each with the evidence ``migrated from gr_e``, so ``history`` shows it all.
Spellings that share one edition-1 key but differ in edition 2 (``Größe``, ``Grüße``) are a conflict:
nothing of that cell is re-keyed, and the user decides.

The batch carries op ids derived from the cells, so a migration interrupted between the batch and the
switch is finished by running it again: the batch is then a duplicate, and the switch records the index
of the original events.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pmem.adapters.service.bootstrap import Wiring
from pmem.adapters.storage.meta import META, WRITE_LOCK, write_meta
from pmem.domain.errors import InvalidOperation
from pmem.domain.keys import KEY_EDITION, cell_id, normalize_key
from pmem.domain.operations import MAX_FIELD_CHARS, parse_operation, string_problem
from pmem.domain.state import OPEN

SOURCE = "pmem migrate keys"
SINCE = "key_edition_since"


@dataclass(frozen=True)
class Rekey:
    """Cell ``old`` of ``namespace`` moves to ``new`` (the spellings that asked for it)."""

    namespace: str
    old: str
    new: str
    spellings: tuple[str, ...]


def read_spellings(lines: Iterable[str]) -> list[str]:
    """The raw keys of a spellings file (blank lines skipped); a line no key could be is bad input."""
    out: list[str] = []
    for n, line in enumerate(lines, 1):
        raw = line.rstrip("\r\n")
        if not raw.strip():
            continue
        problem = string_problem(raw, "spelling", MAX_FIELD_CHARS)
        if problem is not None:
            raise InvalidOperation(f"spellings line {n}: {problem}", field="spellings")
        out.append(raw.strip())
    return out


def plan(cells: dict[str, list[str]], spellings: list[str]) -> tuple[list[Rekey], list[dict[str, Any]]]:
    """The re-keyings and the conflicts the ``spellings`` ask for, given the namespaces each edition-1
    key holds a cell in (``cells``: key -> namespaces)."""
    wanted: dict[str, dict[str, list[str]]] = {}  # edition-1 key -> edition-2 key -> spellings
    for raw in spellings:
        old, new = normalize_key(raw, 1), normalize_key(raw, KEY_EDITION)
        if old and new and old != new and old in cells:
            wanted.setdefault(old, {}).setdefault(new, []).append(raw)
    rekeys: list[Rekey] = []
    conflicts: list[dict[str, Any]] = []
    for old, targets in sorted(wanted.items()):
        if len(targets) > 1:
            conflicts.append({"action": "conflict", "from": old, "to": sorted(targets),
                              "spellings": sorted(s for ss in targets.values() for s in ss),
                              "namespaces": cells[old],
                              "reason": f"spellings with different edition-2 keys share the edition-1 key "
                                        f"{old!r}: not re-keyed, re-key by hand"})
            continue
        (new, raws), = targets.items()
        rekeys += [Rekey(ns, old, new, tuple(sorted(raws))) for ns in cells[old]]
    return rekeys, conflicts


def rekey_operations(w: Wiring, reads: Any, r: Rekey) -> tuple[list[dict[str, Any]], str | None]:
    """The operations that move cell ``r.old`` to ``r.new``, or why it is not moved (the new key holds a
    cell already)."""
    if reads.timeline(cell_id(r.namespace, r.new), None, r.namespace) is not None:  # by its edition-2 key
        return [], f"the edition-2 key {r.new!r} already holds a cell"
    view = reads.get(r.old, namespace=r.namespace)
    trust = {v.value: v.trust for v in reads.history(r.old, namespace=r.namespace).versions if v.status in OPEN}
    values = ([view.value] if view.value is not None else []) + [a for a in view.alternatives if a != view.value]
    if not values:
        return [], f"the cell {r.old!r} has no open version to move"
    text = f"migrated from {r.old} to {r.new} ({SOURCE})"
    ops: list[dict[str, Any]] = []
    for value in values:
        ops.append({"op": "contest" if ops else "accept", "key": r.new, "value": value, "trust": trust[value],
                    "source": SOURCE, "text": text})
    for value in values:
        ops.append({"op": "revoke", "key": r.old, "value": value, "trust": trust[value], "source": SOURCE,
                    "text": f"migrated to {r.new} ({SOURCE})"})
    for n, op in enumerate(ops):
        op["namespace"], op["op_id"] = r.namespace, f"migrate-keys:{r.old}:{r.new}:{n}"
    return ops, None


def migrate_keys(w: Wiring, reads: Any, writes: Any, spellings: list[str], dry_run: bool) -> Iterator[dict[str, Any]]:
    """Switch the store to the current key edition, re-keying the cells ``spellings`` name (see the
    module's docstring); one dict per re-keying, conflict or skip, then a summary."""
    if w.key_edition == KEY_EDITION:
        yield {"key_edition": KEY_EDITION, "changed": False,
               "reason": f"the store already uses key edition {KEY_EDITION}: nothing to migrate"}
        return
    rekeys, conflicts = plan(_cells_by_key(w, reads), spellings)
    yield from conflicts
    batch: list[dict[str, Any]] = []
    moved: list[tuple[Rekey, int]] = []
    for r in rekeys:
        ops, why = rekey_operations(w, reads, r)
        row = {"action": "skip" if why else ("would_rekey" if dry_run else "rekey"), "namespace": r.namespace,
               "from": r.old, "to": r.new, "spellings": list(r.spellings)}
        if why:
            yield {**row, "reason": why}
            continue
        moved.append((r, len(ops)))
        batch += ops
        if dry_run:
            yield {**row, "operations": len(ops)}
    if dry_run:
        yield {"dry_run": True, "key_edition": w.key_edition, "would_switch_to": KEY_EDITION,
               "rekeyed": len(moved), "conflicts": len(conflicts)}
        return
    # the new keys are edition-2 keys: parsed by that rule, whatever the store's edition is until the switch
    receipts = writes.apply([parse_operation(d, d["namespace"], KEY_EDITION) for d in batch]) if batch else []
    since = min((x.event_index for x in receipts), default=reads.last_index() + 1)
    position = 0
    for r, count in moved:
        events = [x.event_index for x in receipts[position:position + count]]
        position += count
        yield {"action": "rekey", "namespace": r.namespace, "from": r.old, "to": r.new,
               "spellings": list(r.spellings), "events": events}
    since = switch(w, since)
    yield {"dry_run": False, "key_edition": KEY_EDITION, "since": since, "rekeyed": len(moved),
           "conflicts": len(conflicts)}


def switch(w: Wiring, since: int) -> int:
    """Record the current key edition from event ``since`` on (or from the index an interrupted run
    recorded), use it in this process from now, and return that index."""
    db = w.projection_db
    since = int(write_meta(db, SINCE, str(since)))  # first: a switch interrupted here is finished by a rerun
    with db.write(WRITE_LOCK):
        db.execute(db.upsert(META, ("name", "value"), ("name",)), ("key_edition", str(KEY_EDITION)))
    w.key_edition, w.key_edition_since = KEY_EDITION, since
    return since


def _cells_by_key(w: Wiring, reads: Any) -> dict[str, list[str]]:
    """Every key that holds a cell, with the namespaces it does (the frontier projection, caught up)."""
    with w.lock:
        reads.caught_up_reader(w.namespace, None)
        rows = w.projection_db.execute("SELECT key, namespace FROM cells ORDER BY key, namespace").fetchall()
    out: dict[str, list[str]] = {}
    for key, ns in rows:
        out.setdefault(str(key), []).append(str(ns))
    return out
