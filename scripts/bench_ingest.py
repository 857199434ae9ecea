#!/usr/bin/env python3
"""Measure ``pmem ingest`` against ``pmem apply`` of the same writes, in one run on one machine.

A synthetic FactConsolidation-style stream: ``--facts`` lines ``i. <cloze template filled in>.`` over
``--slots`` (subject, relation) slots drawn with a seeded RNG, so later lines override earlier ones.

* ``ingest``: ``pmem ingest STREAM --db NEW.db`` (extract, annotate against each head, write, print).
* ``apply``: ``pmem apply OPS.jsonl --db NEW.db`` of the accept operations ingest ends up writing
  (keys and values taken from ingest's receipts, untimed), as one batch: the cost of the writes alone.

Both run as subprocesses of the installed ``pmem`` (start-up included), interleaved ``--repeat`` times;
the best time of each is reported with facts/s and the ratio. Then the ingested store is checked: one
frontier cell per slot.

    .venv/bin/python scripts/bench_ingest.py [--facts 20000] [--slots 12000] [--repeat 3] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from domain.extraction.cloze import TEMPLATES  # noqa: E402

PMEM = str(Path(sys.executable).parent / "pmem")


def stream(facts: int, slots: int, seed: int) -> tuple[str, int]:
    rng = random.Random(seed)
    pids = sorted(TEMPLATES)
    slot_list = [(f"Subject {i}", rng.choice(pids)) for i in range(slots)]
    lines, used = ["Here is a list of facts:"], set()
    for i in range(facts):
        subject, pid = rng.choice(slot_list)
        used.add((subject, TEMPLATES[pid][1]))
        sentence = TEMPLATES[pid][0].replace("[X]", subject).replace("__", f"Object {rng.randrange(10**6)}")
        lines.append(f"{i}. {sentence}.")
    return "\n".join(lines) + "\n", len(used)


def run(*args: str) -> tuple[float, bytes]:
    t = time.perf_counter()
    r = subprocess.run([PMEM, *args], capture_output=True)
    elapsed = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"pmem {' '.join(args)} failed: {r.stderr.decode()}")
    return elapsed, r.stdout


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--facts", type=int, default=20_000)
    p.add_argument("--slots", type=int, default=12_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    text, n_slots = stream(args.facts, args.slots, args.seed)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "stream.txt").write_text(text)
        _, out = run("ingest", str(tmp / "stream.txt"), "--db", str(tmp / "probe.db"))
        receipts = [json.loads(line) for line in out.splitlines()]
        ops = [{"op": r["requested"], "key": r["key"], "value": r["head"]["value"]}
               for r in receipts if r["event_index"] is not None]
        (tmp / "ops.jsonl").write_text("".join(json.dumps(o) + "\n" for o in ops))
        best = {"ingest": float("inf"), "apply": float("inf")}
        for i in range(args.repeat):
            t, _ = run("ingest", str(tmp / "stream.txt"), "--db", str(tmp / f"i{i}.db"))
            best["ingest"] = min(best["ingest"], t)
            t, _ = run("apply", str(tmp / "ops.jsonl"), "--db", str(tmp / f"a{i}.db"))
            best["apply"] = min(best["apply"], t)
        _, frontier = run("frontier", "--db", str(tmp / "i0.db"))
        cells = len(frontier.splitlines())
    assert cells == n_slots, (cells, n_slots)
    print(f"{args.facts} facts over {n_slots} slots; frontier after ingest: {cells} cells (checked)")
    for name, t in best.items():
        print(f"{name:>6}: {t:.2f} s, {args.facts / t:,.0f} facts/s")
    print(f"ingest / apply time: {best['ingest'] / best['apply']:.2f}")


if __name__ == "__main__":
    main()
