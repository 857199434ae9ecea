#!/usr/bin/env python3
"""Benchmark the frontier projection: a rebuild from index 1, and reads from it versus replay.

Writes N mixed operations (mostly ``accept``, some ``contest``/``revoke``/``support``) over K keys
from a seeded RNG into a fresh store, then times, best of ``--repeat``:

* ``rebuild``: ``store.rebuild()`` (drop the tables, replay every event, 1,000 per transaction);
* ``get``: ``store.get(key)`` and ``store.get(key, as_of=N/2)`` for 200 random keys, per read, on
  the projection and on the replay reader;
* ``frontier``: ``store.frontier()`` over the whole namespace, on both readers.

Run it with the project's virtualenv:

    .venv/bin/python scripts/bench_projection.py [--ops 100000] [--keys 10000] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pmem


def operations(n: int, keys: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    kinds = ["accept"] * 6 + ["contest", "revoke", "support", "resolve"]
    return [{"op": op, "key": f"k{rng.randrange(keys)}", "value": f"v{rng.randrange(5)}"}
            for op in (rng.choice(kinds) for _ in range(n))]


def best(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ops", type=int, default=100_000)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "bench.db"
        with pmem.open(path) as store:
            store.apply(operations(a.ops, a.keys, a.seed))
        sample = [f"k{rng.randrange(a.keys)}" for _ in range(200)]
        out: dict[str, Any] = {"ops": a.ops, "keys": a.keys}
        with pmem.open(path) as store, pmem.open(path, reader="replay") as replay:
            out["rebuild_s"] = round(best(store.rebuild, a.repeat), 3)
            out["rebuild_events_per_s"] = round(a.ops / out["rebuild_s"])
            for name, s in (("projection", store), ("replay", replay)):
                per_read = best(lambda s=s: [s.get(k) for k in sample], a.repeat) / len(sample)
                out[f"{name}_get_ms"] = round(per_read * 1e3, 3)
                half = a.ops // 2
                per_read = best(lambda s=s, half=half: [s.get(k, as_of=half) for k in sample], a.repeat) / len(sample)
                out[f"{name}_get_as_of_ms"] = round(per_read * 1e3, 3)
                out[f"{name}_frontier_s"] = round(best(s.frontier, a.repeat), 3)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
