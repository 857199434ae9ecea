"""Cost of an incremental controller update against a full recompute, on a 100,000-node graph.

A seeded random graph: ``--nodes`` nodes with importance 1-100, PageRank-like weights, 100
communities, 30% confirmed and one prerequisite edge per node (to a random node). Then ``--updates``
random writes, each followed by a top-10 read, timed two ways in the same run:

* incremental: ``Controller`` with dependency-aware cached scores (only dirty entries rescored);
* full recompute: ``recompute`` (candidate set, maximum and every score from scratch) + ``rank``.

Writes are drawn from: an importance change, a confirmation (unlocks dependents), a new prerequisite,
a community change, a new previous pick. Both answers are checked equal after every write.

    .venv/bin/python -m benchmarks.controller [--nodes 100000] [--updates 100] [--seed 1]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time

from benchmarks.harness import Run, add_output_options
from pmem.projections.controller import Controller, rank, recompute


def build(n: int, rng: random.Random) -> Controller:
    c = Controller()
    for i in range(n):
        c.upsert(f"n{i}", importance=float(rng.randint(1, 100)), pagerank=rng.random() / n,
                 community=rng.randrange(100), confirmed=rng.random() < 0.3)
    for i in range(1, n):
        if rng.random() < 0.9:
            c.add_prerequisite(f"n{rng.randrange(n)}", f"n{i}")
    c.scores()
    return c


def write(c: Controller, n: int, rng: random.Random) -> str:
    v, kind = f"n{rng.randrange(n)}", rng.choice(["importance", "confirm", "require", "community", "pick"])
    if kind == "importance":
        c.upsert(v, importance=float(rng.randint(1, 100)))
    elif kind == "confirm":
        c.upsert(v, confirmed=not c.nodes[v].confirmed)
    elif kind == "require":
        u = f"n{rng.randrange(n)}"
        if u != v:
            c.add_prerequisite(u, v)
    elif kind == "community":
        c.upsert(v, community=rng.randrange(100))
    else:
        c.pick(v)
    return kind


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=100_000)
    p.add_argument("--updates", type=int, default=100)
    p.add_argument("--seed", type=int, default=1)
    add_output_options(p, "controller")
    args = p.parse_args(argv)
    run = Run("controller", args.results)
    rng = random.Random(args.seed)
    t0 = time.perf_counter()
    c = build(args.nodes, rng)
    print(f"built {args.nodes} nodes, {len(c.candidates)} candidates in {time.perf_counter() - t0:.1f} s",
          file=sys.stderr)
    inc: list[float] = []
    full: list[float] = []
    rescored: list[int] = []
    for _ in range(args.updates):
        before = c.recomputed
        t0 = time.perf_counter()
        write(c, args.nodes, rng)
        top_inc = c.top(10)
        inc.append(time.perf_counter() - t0)
        rescored.append(c.recomputed - before)
        t0 = time.perf_counter()
        top_full = rank(recompute(c.nodes, c.requires, c.previous), 10)
        full.append(time.perf_counter() - t0)
        assert top_inc == top_full, "the incremental top-10 differs from the full recompute's"
    ms = {"incremental (cached)": inc, "full recompute (baseline)": full}
    run.table([{"per write + top-10 read": name, "median ms": statistics.median(t) * 1000,
                "mean ms": statistics.mean(t) * 1000} for name, t in ms.items()],
              f"{args.nodes:,} nodes, {args.updates} writes")
    run.beside("incremental update + top-10, median", statistics.median(inc) * 1000,
               "full recompute + top-10, median", statistics.median(full) * 1000, "ms")
    run.figures |= {"nodes": args.nodes, "updates": args.updates, "candidates": len(c.candidates),
                    "incremental_median_ms": statistics.median(inc) * 1000,
                    "full_median_ms": statistics.median(full) * 1000,
                    "rescored_per_write_median": statistics.median(rescored), "rescored_per_write_max": max(rescored)}
    run.finish()

if __name__ == "__main__":
    main()
