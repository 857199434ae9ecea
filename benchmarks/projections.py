"""Benchmark the projections, each figure next to a baseline measured in the same run.

1. A log of ``--events`` events over ``--cells`` cells is written through ``Store.apply`` in batches
   of 20,000 (first one ``accept`` per cell, then a seeded mix: mostly ``accept`` of a new value, some
   ``contest``, ``revoke``, ``support``). Setup, not timed as a figure.
2. **Rebuild rate**: ``store.rebuild("frontier")`` (replay every event, by ranges of cells spread over
   the cores, into shadow tables swapped in at the end) against the baseline of a raw ``SELECT state``
   of the same event rows plus ``json.loads`` of each (``orjson.loads`` shown too). Ratio = rebuild
   events/s / baseline events/s. The rebuild runs in a fresh process that only opens the store (as
   ``pmem rebuild`` does). Also: the processes it used, that process's and its largest worker's peak
   RSS, and the
   fold alone on one core (a quarter of the cells, rows read beforehand, nothing written; and the same
   rows in plaintext, the baseline of what opening sealed fields costs), and the
   rows each frontier table holds per event afterwards (what the rebuild inserted).
3. **as_of get**: ``store.get(key, as_of=N)`` for ``--gets`` random (cell, N) pairs: p50 and p99,
   from the projection's interval queries and (baseline) from the replay reader folding the cell,
   measured the way a user hits it: in a fresh reader process that opens the store (after 200
   warm-up reads); ``get(key)`` now too. The same reads in the benchmark process itself (which
   wrote the log and holds its objects) are reported as well.
4. **Peak RSS and database size**: this process's peak RSS after steps 1-3 (and the rebuild's own
   increase of it), and the store file (plus WAL), both also scaled to one million events.
5. **CLI start-up**: wall time of ``pmem --db STORE get KEY`` (a subprocess) p50 over ``--cli-runs``,
   against ``python -c pass`` with the same interpreter.
6. **Search**: a second store of ``--search-cells`` cells (one ``accept`` each), embedded with the
   hashing embedder (the FAISS latency does not depend on the embedder; ONNX would take minutes
   here); ``--queries`` top-12 searches, for ``flat`` and ``hnsw``, p50/p99, through
   ``VectorSearch.search`` (catch-up check, eligible set, query embedding, ranking), through
   ``top_cells`` alone (the ranking, query vector given) and through ``Store.search`` (plus reading
   the 12 cells); ``Store.read`` of the same queries (the cells context, k=12), undated and dated
   (``dated=True``: one log read per cell, docs/reading.md#dated-cells); also searches as of half the
   log (a set below the head, read once and kept) and,
   flat only, a search right after one new event (``--after-write`` of them). Baseline: numpy brute
   force ``matrix @ q`` + ``argpartition`` over the same vectors, timed in its own block after the
   others (see ``time_paths`` for why not query by query in turn). Recall@12: flat against an exact
   float64 ranking (must be 1.0; near-ties within 1e-6 count as
   equal, and how many queries returned exactly the float64 top-12 set is shown), HNSW against flat.

    .venv/bin/python -m benchmarks.projections [--events 1000000] [--cells 100000]
        [--search-cells 100000] [--skip log|search] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

import pmem
from benchmarks.harness import (
    ROOT,
    Run,
    add_output_options,
    children_peak_rss_mb,
    each,
    latency_ms,
    peak_rss_mb,
)
from benchmarks.projections_search import bench_search
from pmem.adapters.eventstore import codec
from pmem.adapters.eventstore.gc_pause import no_gc
from pmem.adapters.eventstore.sealing import Keyring
from pmem.adapters.eventstore.stored_log import range_keys, range_rows, select_keys
from pmem.adapters.readmodels.parallel_rebuild import cell_ranges, fold_rows

BATCH = 20_000
PMEM_BIN = str(Path(sys.executable).parent / "pmem")


def operations(events: int, cells: int, seed: int) -> Iterator[dict[str, Any]]:
    """One accept per cell, then a seeded mix that creates, contests, retracts and supports versions."""
    rng = random.Random(seed)
    for c in range(cells):
        yield {"op": "accept", "key": f"cell {c}", "value": f"value {c} 0"}
    kinds = ["accept"] * 7 + ["contest", "revoke", "support"]
    for i in range(cells, events):
        op = rng.choice(kinds)
        d = {"op": op, "key": f"cell {rng.randrange(cells)}"}
        if op in ("accept", "contest"):
            d["value"] = f"value {i}"
        yield d


def write(store: pmem.Store, ops: Iterator[dict[str, Any]]) -> None:
    batch: list[dict[str, Any]] = []
    for op in ops:
        batch.append(op)
        if len(batch) == BATCH:
            store.apply(batch)
            batch = []
    if batch:
        store.apply(batch)


def raw_rate(path: Path, table: str, loads: Callable[[bytes], Any]) -> float:
    """Events/s of ``SELECT state`` of every event row plus ``loads`` of each body."""
    t0 = time.perf_counter()
    conn = sqlite3.connect(path)
    n = 0
    for (state,) in conn.execute(f"SELECT state FROM {table} ORDER BY rowid"):
        loads(state)
        n += 1
    conn.close()
    return n / (time.perf_counter() - t0)


def fold_alone_rates(path: Path, table: str) -> tuple[float, float]:
    """Events/s of the rebuild's fold alone, on one core: the rows of a quarter of the cells, read
    beforehand, decoded and folded to their final rows in memory, nothing written. The floor of what
    a rebuild costs per event in Python, whatever it does with the rows. Twice: the stored (sealed)
    rows with their keys, and (the baseline of what sealing costs) the same rows opened beforehand
    and stored again in plaintext, as a store written before sealing holds them."""
    conn = sqlite3.connect(path)
    cells = cell_ranges(4)[0]
    rows = range_rows(conn, table, cells, 1 << 62, 4)
    keys = Keyring(str(path), lambda ids: select_keys(conn, ids))  # the data keys, as the rebuild reads them
    plain = [(i, c, v, t, codec.encode_state(codec.decode_fields(t, s, c, v, keys), codec.CLASS_VERSION))
             for i, c, v, t, s in rows]
    keys.drop(c for _, c, _, _, _ in rows)
    rates = []
    for stored, ring in ((rows, keys), (plain, None)):
        t0 = time.perf_counter()
        if ring is not None:
            ring.refresh_range(cells, range_keys(conn, cells))
        with no_gc():  # as in the rebuild
            out = fold_rows(stored, ring)
        rates.append(out.events / (time.perf_counter() - t0))
    conn.close()
    return rates[0], rates[1]


def bench_log(path: Path, a: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"events": a.events, "cells": a.cells}
    t0 = time.perf_counter()
    with pmem.open(path, synchronous="OFF") as store:
        store.log_store.sealing = not a.unsealed
        write(store, operations(a.events, a.cells, a.seed))
        out["setup_write_s"] = round(time.perf_counter() - t0, 1)
        table = store.log_store.recorder.events_table_name
    base_json = raw_rate(path, table, json.loads)
    base_orjson = raw_rate(path, table, orjson.loads)
    fold_rate, fold_unsealed = fold_alone_rates(path, table)
    r = rebuild_in_fresh_process(path)
    with pmem.open(path) as store:
        rate = r["events"] / r["seconds"]
        out["rebuild"] = {"events_per_s": round(rate), "seconds": round(r["seconds"], 1),
                          "processes": r["processes"],
                          "rebuilding_process_peak_rss_mb": r["peak_rss_mb"],
                          "worker_peak_rss_mb": r["worker_peak_rss_mb"],
                          "baseline_select_json_loads_per_s": round(base_json),
                          "baseline_select_orjson_loads_per_s": round(base_orjson),
                          "ratio_vs_json_loads": round(rate / base_json, 2),
                          "ratio_vs_orjson_loads": round(rate / base_orjson, 2),
                          "fold_alone_one_core_per_s": round(fold_rate),
                          "fold_alone_ratio_vs_json_loads": round(fold_rate / base_json, 2),
                          "fold_alone_unsealed_one_core_per_s": round(fold_unsealed),
                          "fold_alone_sealed_vs_unsealed": round(fold_rate / fold_unsealed, 2),
                          "rows_per_event": rows_per_event(store)}
        rng = random.Random(a.seed + 1)
        last = store.last_index()
        pairs = [(f"cell {rng.randrange(a.cells)}", rng.randint(1, last)) for _ in range(a.gets)]
        each(lambda p: store.get(p[0], as_of=p[1]), pairs[:200])  # warm the page cache
        out["as_of_get_in_writer_process"] = latency_ms(each(lambda p: store.get(p[0], as_of=p[1]), pairs))
        out["get_now_in_writer_process"] = latency_ms(each(lambda p: store.get(p[0]), pairs))
    out.update(reads_in_fresh_process(path, pairs))
    peak = peak_rss_mb()
    size = sum(f.stat().st_size for f in path.parent.glob(path.name + "*") if ".vec-" not in f.name)
    per_m = 1e6 / a.events
    out["peak_rss_mb"] = round(peak)
    out["db_size_mb"] = round(size / 2**20)
    out["per_million_events"] = {"peak_rss_mb": round(peak * per_m),
                                 "db_size_mb": round(size / 2**20 * per_m)}
    out["cli_start"] = bench_cli(path, a)
    return out


def rows_per_event(store: pmem.Store) -> dict[str, float]:
    """Rows of each frontier table per event of the log: what a rebuild inserts."""
    from pmem.projections.frontier import TABLES

    conn, events = store.projection_db, store.last_index()
    per = {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] / events for t in TABLES}
    return {"total": round(sum(per.values()), 2), **{t: round(n, 2) for t, n in per.items()}}


def rebuild_in_fresh_process(path: Path) -> dict[str, Any]:
    """``rebuild("frontier")`` run by a new process that only opens the store, as ``pmem rebuild``
    does: its peak RSS and its workers' are the rebuild's own (a worker started by this large
    process would report this process's RSS as its peak: ``ru_maxrss`` keeps the high-water mark of
    the memory it shared before ``exec``; so the rebuilding process reports ``VmHWM``, which starts
    afresh at ``exec``)."""
    r = subprocess.run([sys.executable, "-m", "benchmarks.projections", "--rebuilder", str(path)], check=True,
                       capture_output=True, cwd=ROOT)
    return dict(json.loads(r.stdout))


def rebuilder(path: Path) -> dict[str, Any]:
    """Run in the fresh rebuilding process."""
    with pmem.open(path) as store:
        projection = store.frontier_projection
        r = store.rebuild("frontier")
        return {"events": r["events"], "seconds": r["seconds"],
                "processes": projection._workers(r["events"], projection._store_path()),
                "peak_rss_mb": round(peak_rss_mb()),  # VmHWM: this process's own, not its parent's before exec
                "worker_peak_rss_mb": round(children_peak_rss_mb())}


def reads_in_fresh_process(path: Path, pairs: list[tuple[str, int]]) -> dict[str, Any]:
    """The get latencies measured by a new process that only opens the store and reads."""
    pairs_file = path.with_name("pairs.json")
    pairs_file.write_text(json.dumps(pairs))
    r = subprocess.run([sys.executable, "-m", "benchmarks.projections", "--reader", str(path), str(pairs_file)],
                       check=True, capture_output=True, cwd=ROOT)
    return dict(json.loads(r.stdout))


def reader(path: Path, pairs_file: Path) -> dict[str, Any]:
    """Run in the fresh reader process: warm up, then time each kind of read."""
    pairs = [tuple(p) for p in json.loads(pairs_file.read_text())]
    out: dict[str, Any] = {}
    with pmem.open(path) as store:
        each(lambda p: store.get(p[0], as_of=p[1]), pairs[:200])  # warm the page cache
        out["as_of_get"] = latency_ms(each(lambda p: store.get(p[0], as_of=p[1]), pairs))
        out["get_now"] = latency_ms(each(lambda p: store.get(p[0]), pairs))
    with pmem.open(path, reader="replay") as replay:  # baseline: the same reads by folding the cell's events
        each(lambda p: replay.get(p[0], as_of=p[1]), pairs[:200])
        out["as_of_get_by_replay"] = latency_ms(each(lambda p: replay.get(p[0], as_of=p[1]), pairs))
    out["cpu_loop_same_p50"] = cpu_loop(out["as_of_get"]["p50_ms"] / 1e3, len(pairs))
    return out


def cpu_loop(seconds: float, n: int) -> dict[str, Any]:
    """p50/p99 of a pure-Python loop (no I/O, no allocation) sized to take ``seconds``: what the
    machine's scheduling alone does to the tail of an operation that short."""

    def loop(k: int) -> None:
        for _ in range(k):
            pass

    per_iteration = min(each(loop, [100_000] * 5)) / 100_000  # the fastest of 5: least disturbed
    k = max(1, round(seconds / per_iteration))
    return {"iterations": k, **latency_ms(each(loop, [k] * n))}


def bench_cli(path: Path, a: argparse.Namespace) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "PMEM_DB"}

    def run(cmd: list[str]) -> float:
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, env=env)
        return time.perf_counter() - t0

    run([PMEM_BIN, "--db", str(path), "get", "cell 1"])  # warm
    pmem_times = [run([PMEM_BIN, "--db", str(path), "get", f"cell {i}"]) for i in range(a.cli_runs)]
    python_times = [run([sys.executable, "-c", "pass"]) for _ in range(a.cli_runs)]
    p50, base = statistics.median(pmem_times), statistics.median(python_times)
    return {"pmem_get_p50_ms": round(p50 * 1e3), "python_c_pass_p50_ms": round(base * 1e3),
            "ratio": round(p50 / base, 1)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--cells", type=int, default=100_000)
    ap.add_argument("--search-cells", dest="search_cells", type=int, default=100_000)
    ap.add_argument("--gets", type=int, default=2_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--after-write", dest="after_write", type=int, default=100,
                    help="flat searches timed right after one new event each")
    ap.add_argument("--cli-runs", dest="cli_runs", type=int, default=15)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--skip", choices=("log", "search"), help="leave one part out")
    ap.add_argument("--unsealed", action="store_true",
                    help="write the log without sealing (the baseline of what sealing costs the rebuild and reads)")
    ap.add_argument("--quick", action="store_true",
                    help="a small run (100,000 events over 10,000 cells, 10,000 search cells, fewer samples)")
    ap.add_argument("--reader", nargs=2, metavar=("STORE", "PAIRS"), help=argparse.SUPPRESS)  # the child of step 3
    ap.add_argument("--rebuilder", metavar="STORE", help=argparse.SUPPRESS)  # the child of step 2
    add_output_options(ap, "projections")
    a = ap.parse_args(argv)
    if a.quick:
        a.events, a.cells, a.search_cells, a.gets, a.queries, a.cli_runs = 100_000, 10_000, 10_000, 300, 100, 5
    if a.rebuilder:
        print(json.dumps(rebuilder(Path(a.rebuilder))))
        return
    if a.reader:
        print(json.dumps(reader(Path(a.reader[0]), Path(a.reader[1]))))
        return
    run = Run("projections", a.results)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        if a.skip != "log":
            run.figures["log"] = log = bench_log(d / "log.db", a)
            print(json.dumps({"log": log}), file=sys.stderr, flush=True)
            report_log(run, log)
        if a.skip != "search":
            run.figures["search"] = found = bench_search(d, a)
            print(json.dumps({"search": found}), file=sys.stderr, flush=True)
            report_search(run, found)
    run.finish()


def report_log(run: Run, log: dict[str, Any]) -> None:
    r = log["rebuild"]
    run.beside("frontier rebuild events/s", r["events_per_s"], "SELECT state + json.loads events/s",
               r["baseline_select_json_loads_per_s"], "events/s")
    run.beside("fold alone, sealed, one core events/s", r["fold_alone_one_core_per_s"],
               "the same fold on plaintext rows events/s", r["fold_alone_unsealed_one_core_per_s"], "events/s")
    run.beside("as_of get p50 (fresh process)", log["as_of_get"]["p50_ms"], "as_of get by replay p50",
               log["as_of_get_by_replay"]["p50_ms"], "ms")
    run.beside("pmem get p50 (a process)", log["cli_start"]["pmem_get_p50_ms"], "python -c pass p50",
               log["cli_start"]["python_c_pass_p50_ms"], "ms")


def report_search(run: Run, found: dict[str, Any]) -> None:
    kinds = ("flat", "hnsw")
    paths = [p for p in found["flat"] if isinstance(found["flat"][p], dict) and "p50_ms" in found["flat"][p]]
    run.table([{"path": p, **{f"{k} {q}": found[k][p][f"{q}_ms"] for k in kinds if p in found[k]
                              for q in ("p50", "p99")}} for p in paths if p in found["hnsw"]],
              f"Top-12 search over {found['cells']:,} cells ({found['queries']} queries, ms)")
    for k in kinds:
        run.beside(f"{k} vector search p50", found[k]["vector_search"]["p50_ms"], "numpy brute force p50",
                   found[k]["numpy_brute_force"]["p50_ms"], "ms")

if __name__ == "__main__":
    main()
