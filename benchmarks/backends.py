"""Ingest throughput and projection lag on PostgreSQL against SQLite, side by side in one run.

For each backend and each writer count W in ``--writers`` (default 1, 2, 4), on a fresh store:

* W writer processes each apply ``--ops / W`` ``accept`` operations in batches of ``--batch``
  (``store.apply``: one transaction per batch), on ``--keys`` keys of their own plus a few hot keys
  every writer touches (version conflicts: reload and retry);
* one follower process catches the frontier projection up in a loop, as a projection worker would,
  and samples its lag (events in the log not yet projected) after every catch-up.

Reported per run: events/s (all operations over the wall time from the first writer's start to the
last writer's end), the follower's lag p50 and max in events, and the drain time (seconds from the
last write until the projection had applied every event). The ratio column divides each PostgreSQL
figure by the SQLite one of the same W. At the end every store is checked: ``last_index() == ops``
and the frontier projection at the last index.

PostgreSQL: ``--pg URL`` (each run gets a fresh schema), else a throwaway cluster is started with
``scripts/pg-cluster.sh`` (fsync on) and removed afterwards. SQLite runs with its default
``synchronous=FULL``. The machine is shared: figures are noisy, rerun before comparing.

    .venv/bin/python -m benchmarks.backends [--ops 20000] [--batch 100] [--writers 1 2 4] [--pg URL]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks.harness import ROOT, Run, add_output_options

PG_CLUSTER = str(ROOT / "scripts" / "pg-cluster.sh")
HOT = 5


def writer(db: str, w: int, n: int, keys: int, batch: int, start: Any, done: Any) -> None:
    import pmem

    ops = [{"op": "accept", "key": f"hot{i % HOT}" if i % 10 == 0 else f"w{w}k{i % keys}", "value": f"v{w}-{i}"}
           for i in range(n)]
    with pmem.open(db) as store:
        start.wait()
        for lo in range(0, n, batch):
            store.apply(ops[lo:lo + batch])
    done.put(time.perf_counter())


def follower(db: str, total: int, stop_at: Any, out: Any) -> None:
    import pmem

    lags: list[int] = []
    with pmem.open(db) as store:
        p = store.frontier_projection
        while True:
            p.catch_up()
            last = store.last_index()
            lags.append(last - p.position())
            if p.position() >= total:
                break
            time.sleep(0.01)
    out.put((lags, time.perf_counter()))


def run_one(db: str, writers: int, ops: int, keys: int, batch: int) -> dict[str, float]:
    import pmem

    with pmem.open(db) as store:
        store.catch_up()  # tables exist before the clock starts
    ctx = mp.get_context("fork")
    start, done, out = ctx.Event(), ctx.Queue(), ctx.Queue()
    per = ops // writers
    ws = [ctx.Process(target=writer, args=(db, w, per, keys // writers, batch, start, done)) for w in range(writers)]
    f = ctx.Process(target=follower, args=(db, per * writers, None, out))
    for p in ws:
        p.start()
    f.start()
    time.sleep(1.0)  # every process has opened its store
    t0 = time.perf_counter()
    start.set()
    ends = [done.get() for _ in ws]
    lags, caught = out.get()
    for p in [*ws, f]:
        p.join()
        assert p.exitcode == 0, f"a process failed ({p.exitcode})"
    t1 = max(ends)
    with pmem.open(db) as store:
        assert store.last_index() == per * writers, store.last_index()
        assert store.frontier_projection.position() == per * writers
    return {"events_s": per * writers / (t1 - t0), "lag_p50": statistics.median(lags), "lag_max": max(lags),
            "drain_s": max(caught - t1, 0.0)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ops", type=int, default=20_000)
    ap.add_argument("--keys", type=int, default=4_000)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--writers", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--pg", help="postgresql://user@host:port/dbname (default: a throwaway cluster)")
    add_output_options(ap, "backends")
    a = ap.parse_args(argv)
    run = Run("backends", a.results)
    tmp = Path(tempfile.mkdtemp(prefix="pmem-bench-backends-"))
    cluster = None
    pg = a.pg
    if pg is None:
        cluster = Path(tempfile.mkdtemp(prefix="pmem-bench-pg-"))  # its own folder: the postgres user owns it
        pg = subprocess.run([PG_CLUSTER, "start", str(cluster)], check=True, capture_output=True,
                            text=True).stdout.strip()
    rows = []
    try:
        for w in a.writers:
            s = run_one(str(tmp / f"w{w}.db"), w, a.ops, a.keys, a.batch)
            p = run_one(f"{pg}?schema=bench_{uuid.uuid4().hex[:8]}", w, a.ops, a.keys, a.batch)
            rows.append({"writers": w, "SQLite events/s": s["events_s"], "PostgreSQL events/s": p["events_s"],
                         "PG/SQLite": p["events_s"] / s["events_s"], "lag p50 SQLite": s["lag_p50"],
                         "lag p50 PG": p["lag_p50"], "lag max SQLite": s["lag_max"], "lag max PG": p["lag_max"],
                         "drain s SQLite": s["drain_s"], "drain s PG": p["drain_s"]})
            run.beside(f"PostgreSQL events/s, {w} writers", p["events_s"], "SQLite events/s", s["events_s"],
                       "events/s")
    finally:
        if cluster is not None:
            subprocess.run([PG_CLUSTER, "stop", str(cluster)], check=False)
    run.table(rows, f"{a.ops:,} accept operations in batches of {a.batch}, {a.keys:,} keys + {HOT} hot keys, "
                    f"a fresh store per run (lag in events)")
    run.figures["runs"] = rows
    run.finish()

if __name__ == "__main__":
    main()
