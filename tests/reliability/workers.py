"""Child processes for the concurrency and crash tests, run by path with the repository root on
``PYTHONPATH`` (they must be separate interpreters: real processes, real SQLite locks, real kills).

    python tests/reliability/workers.py hammer DB PROC COUNT SEED OUT PAUSE_S
        Open the store, print ``ready``, wait for a line on stdin, then send COUNT random operations on
        the shared keys, one call each, with op_id ``p{PROC}-{i}``, pausing up to PAUSE_S
        seconds after each. Writes one JSON line per operation
        (what was sent and the receipt) to OUT.

    python tests/reliability/workers.py resend DB COUNT SEED OUT
        Like hammer, but every process sends the same COUNT operations (op_ids ``shared-{i}``) in its
        own order: each must be recorded once, whichever process gets there first.

    python tests/reliability/workers.py append DB PREFIX SEED [RESEND]
        (Also called in a forked child by the crash test, with ``out`` its pipe.)
        Open the store and append operations until killed: single calls and small ``apply`` batches,
        op_ids ``{PREFIX}-{n}``. RESEND is a JSON file of operations left in flight by a killed
        predecessor; they are sent again first, with their original op_ids. Protocol on stdout, one
        flushed write per step: ``send <json list of ops>`` before the call, then one
        ``ack <op_id> <event_index> <duplicate 0|1>`` line per operation once it has committed.
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path
from typing import Any, TextIO

KEYS = ("k0", "k1", "k2", "k3", "k4")
VALUES = ("a", "b", "c")
TRUSTS = (30, 50, 80)
OPS = ("accept", "contest", "reject", "revoke", "resolve", "support")
VALUE_OPTIONAL = frozenset({"reject", "revoke", "support"})


def random_operation(rng: random.Random, op_id: str) -> dict[str, Any]:
    """One operation as ``Store.apply`` takes it; value-optional ops go without a value a third of the time."""
    op = rng.choice(OPS)
    d: dict[str, Any] = {"op": op, "key": rng.choice(KEYS)}
    if op not in VALUE_OPTIONAL or rng.random() < 2 / 3:
        d["value"] = rng.choice(VALUES)
    trust = rng.choice(TRUSTS)
    d.update(trust=trust, source=f"s{trust}", op_id=op_id)
    return d


def send_one(store: Any, d: dict[str, Any]) -> Any:
    """Send ``d`` through the per-operation method of the API (``store.accept(key, value, ...)``)."""
    method = getattr(store, d["op"])
    evidence = {k: d[k] for k in ("trust", "source", "op_id")}
    if "value" in d:
        return method(d["key"], d["value"], **evidence)
    return method(d["key"], **evidence)


def receipt_json(r: Any) -> dict[str, Any]:
    return {"event_index": r.event_index, "key": r.key, "op": r.op, "requested": r.requested,
            "applied": r.applied, "reason": r.reason, "op_id": r.op_id, "duplicate": r.duplicate,
            "head": None if r.head is None else [r.head.value, r.head.status]}


def hammer(db: str, proc: int, count: int, seed: int, out: str, pause_s: float) -> None:
    import pmem

    rng = random.Random(seed)
    with pmem.open(db) as store, open(out, "w", encoding="utf-8") as f:
        print("ready", flush=True)
        sys.stdin.readline()  # the start signal: every worker begins at once
        for i in range(count):
            d = random_operation(rng, f"p{proc}-{i}")
            r = send_one(store, d)
            time.sleep(pause_s * rng.random())  # a client thinks between calls, so the lock changes hands
            f.write(json.dumps({"sent": d, "receipt": receipt_json(r)}) + "\n")


def append(db: str, prefix: str, seed: int, resend: str | None, out: TextIO = sys.stdout) -> None:
    import pmem

    rng = random.Random(seed)

    def step(ops: list[dict[str, Any]]) -> None:
        out.write("send " + json.dumps(ops) + "\n")
        out.flush()
        receipts = [send_one(store, ops[0])] if len(ops) == 1 and rng.random() < 0.5 else store.apply(ops)
        out.write("".join(f"ack {r.op_id} {r.event_index} {int(r.duplicate)}\n" for r in receipts))
        out.flush()

    with pmem.open(db) as store:
        if resend:
            pending = json.loads(Path(resend).read_text(encoding="utf-8"))
            if pending:
                step(pending)
        n = 0
        while True:
            size = 1 if rng.random() < 0.5 else rng.randint(2, 5)
            ops = [random_operation(rng, f"{prefix}-{n + j}") for j in range(size)]
            n += size
            step(ops)


def resend(db: str, count: int, seed: int, out: str) -> None:
    """Send the same ``count`` operations (op_ids ``shared-{i}``, payloads fixed by seed 0) as every
    other process running this, in an order of its own (``seed``); one JSON receipt line each to OUT."""
    import pmem

    payload = random.Random(0)
    ops = [random_operation(payload, f"shared-{i}") for i in range(count)]
    random.Random(seed).shuffle(ops)
    with pmem.open(db) as store, open(out, "w", encoding="utf-8") as f:
        print("ready", flush=True)
        sys.stdin.readline()
        for d in ops:
            f.write(json.dumps({"sent": d, "receipt": receipt_json(send_one(store, d))}) + "\n")


def main(argv: list[str]) -> None:
    command, args = argv[0], argv[1:]
    if command == "hammer":
        db, proc, count, seed, out, pause_s = args
        hammer(db, int(proc), int(count), int(seed), out, float(pause_s))
    elif command == "append":
        db, prefix, seed, *rest = args
        append(db, prefix, int(seed), rest[0] if rest else None)
    elif command == "resend":
        db, count, seed, out = args
        resend(db, int(count), int(seed), out)
    else:
        raise SystemExit(f"unknown command {command!r} (expected hammer, append or resend)")


if __name__ == "__main__":
    main(sys.argv[1:])
