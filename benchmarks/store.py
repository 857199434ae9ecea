"""Benchmark P-Mem's write path against a raw SQLite baseline, in one run on one machine.

Three paths store the same N ``accept`` operations over K keys (JSON lines from a seeded RNG):

* ``cli``: ``pmem apply FILE --db NEW.db`` as a subprocess of the installed entry point (the
  ``pmem`` script next to ``sys.executable``), process start-up included; the exit code must be 0
  and there must be one receipt line per operation.
* ``api``: ``pmem.open(path)``, ``store.apply(dicts)``, ``store.close()``, where the dicts are
  parsed from the lines with ``orjson.loads`` inside the timing.
* ``raw``: Python's ``sqlite3``, WAL mode, ``synchronous=FULL``: the exact event rows P-Mem wrote
  (read back once, untimed, from the first CLI store), inserted with one ``executemany`` in one
  transaction into a table with the same schema (eventsourcing's, with its primary-key index).
  This is the baseline the goal refers to: it isolates P-Mem's own per-event work from what
  SQLite itself costs to store those rows.
* ``raw-plain``: the same, but the input JSON lines into ``CREATE TABLE ops (key, body)`` with no
  index: the cheapest possible store of the same data, shown for context.
* ``raw-json``: ``raw-plain`` with a ``json.loads`` of each line as it is bound
  (``executemany`` of the JSON lines into a (key, body) table, WAL, ``synchronous=FULL``, one
  transaction).
* ``floor``: the least any sealed write path in Python does per operation, with no deciding, no state,
  no receipts and no checks: each line decoded by ``msgspec`` into a typed struct, the event's fields
  built as a dict, sealed with P-Mem's own ``seal`` (one cipher per cell, built once and held for the
  run; a chunk's nonces taken at once), encoded with ``orjson`` and inserted as ``raw`` inserts its rows.
  What it takes over ``raw`` is about the Python a sealed write cannot avoid: a ``floor`` under 0.3x
  ``raw-json`` says that no Python write path that seals this way reaches 0.3x ``raw-json``.
* ``api-unsealed``: ``api`` with sealing switched off (``store.log_store.sealing = False``, an internal
  knob: stores always seal), the baseline of what sealing values, texts and sources costs the write
  path (docs/forgetting.md).

Then the reads, on the last ``api`` store (sealed) and the last ``api-unsealed`` store, side by side:
``get`` p50/p99 through the projection (``--gets`` random keys), ``get`` through the replay reader (it
decodes, and so unseals, every event of the cell), and a rebuild of the frontier projection (every
event decoded).

For both raw paths, connect + insert + commit are timed (the final ``close`` is not).

Each measurement uses a fresh database in a fresh temporary directory (``$TMPDIR`` chooses where).
The paths run interleaved (cli, api, raw, cli, ...) ``--repeat`` times and the best time of each
is reported, with events/s and the throughput ratio to ``raw``. ``PMEM_SYNCHRONOUS`` is removed
from the environment so P-Mem runs with its default (FULL), like the baseline. Finally the store
the CLI wrote is reopened and checked: ``last_index() == N`` and one frontier cell per distinct key.
The CLI's peak RSS (its own, from ``wait4``) and the store's bytes per event are printed too.

The CLI runs as an installed package does, from compiled bytecode: ``PYTHONDONTWRITEBYTECODE`` is removed
from its environment and one untimed one-line apply compiles it first.

``--resend`` also times, through the CLI, the same lines with an ``op_id`` each written to a fresh
store and then sent again to it (a resend appends nothing), and prints the resend's time over the first
write's. ``--quick`` is 50,000 operations, one repetition, 200 gets (under two minutes).

``--thread-overlap`` also inserts the CLI's event rows in a thread while the main thread runs a pure
Python loop, beside each alone: whether SQLite's work could use the second core.

Then the scaling sweep: ``Store.apply`` of the same number of operations over fewer and fewer keys, so that
each cell's history grows (``--history``: events per cell), beside the raw insert of the rows it wrote, best of
``--repeat``; drawn as ``store_scaling.png`` in ``--plots DIR``.

``--rss-only`` measures only the CLI's peak RSS (``/usr/bin/time``): ``pmem apply`` of one line, then of
``--ops`` lines over ``--keys`` keys, or of each ``LINES:KEYS`` batch of ``--rss-sizes``, all in the same
run (``--rss-sizes 200000:40000,1000000:100000`` shows whether memory grows with the batch).

``--sweep`` runs only the deployment-scale sweep (:mod:`benchmarks.store_sweep`): ``pmem apply`` and
``pmem rebuild`` of ``--lines`` lines over 1,000 keys, 100,000 keys, one key per line, and a mix of
accepts and revokes that walk back along long histories, each row beside its floors (a bounded sealed
floor and a bare insert for the apply, a read floor for the rebuild).

    .venv/bin/python -m benchmarks.store [--quick] [--ops 200000] [--keys 40000] [--seed 1]
        [--history 1,10,100,1000] [--plots DIR]
    .venv/bin/python -m benchmarks.store --sweep [--lines 1000000]
"""


from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pmem
from benchmarks.harness import Run, add_output_options, each, latency_ms, line_panel, save_figure, timed
from benchmarks.store_paths import (
    EVENTS_TABLE,
    PEAK_RSS,
    Row,
    event_rows,
    make_lines,
    raw_transaction,
    run_api,
    run_cli,
    run_floor,
    run_raw,
    run_raw_json,
    run_raw_plain,
    run_resend,
    store_bytes,
    warm_up_cli,
)
from benchmarks.store_sweep import sweep

PATHS = ("cli", "api", "raw", "raw-plain", "raw-json", "api-unsealed", "floor")
MIB = 2**20


def read_figures(db: Path, keys: list[str], n_gets: int, seed: int) -> dict[str, float]:
    """``get`` p50/p99 (ms) through the projection and through the replay reader, and the seconds of a
    frontier rebuild, on the store ``db``."""
    rng = random.Random(seed)
    wanted = [rng.choice(keys) for _ in range(n_gets)]
    out: dict[str, float] = {}
    for reader, n in (("projection", n_gets), ("replay", max(1, n_gets // 4))):
        with pmem.open(db, reader=reader) as store:
            store.get(wanted[0])  # catch up, open the log
            lat = each(store.get, wanted[:n])
        out |= {f"get_{reader}_{k}": v for k, v in latency_ms(lat).items()}
    with pmem.open(db) as store:
        out["rebuild_s"] = timed(lambda: store.rebuild("frontier"))
    return out


def verify(db: Path, n_ops: int, n_distinct: int) -> None:
    with pmem.open(db) as store:
        last, cells = store.last_index(), len(store.frontier())
    if last != n_ops or cells != n_distinct:
        raise SystemExit(f"verify failed: last_index={last} (want {n_ops}), frontier={cells} (want {n_distinct})")
    print(f"verified CLI store: last_index={last}, frontier cells={cells}", file=sys.stderr)


def measure_paths(args: argparse.Namespace, lines: list[bytes], keys: list[str]
                  ) -> tuple[dict[str, list[float]], list[Row], int, dict[str, dict[str, float]]]:
    """Every path ``--repeat`` times, interleaved: their seconds, the CLI's event rows, the CLI store's
    bytes, and the reads on the last sealed and unsealed API stores."""
    times: dict[str, list[float]] = {p: [] for p in PATHS}
    rows: list[Row] = []
    size = 0
    reads: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="pmem-bench-ops-") as ops_dir:
        ops_file = Path(ops_dir) / "ops.jsonl"
        ops_file.write_bytes(b"".join(line + b"\n" for line in lines))
        runners: dict[str, Callable[[Path], float]] = {
            "cli": lambda db: run_cli(ops_file, db, args.ops),
            "api": lambda db: run_api(lines, db),
            "raw": lambda db: run_raw(rows, db),
            "raw-plain": lambda db: run_raw_plain(lines, keys, db),
            "raw-json": lambda db: run_raw_json(lines, keys, db),
            "api-unsealed": lambda db: run_api(lines, db, sealed=False),
            "floor": lambda db: run_floor(lines, db),
        }
        for rep in range(args.repeat):
            last = rep == args.repeat - 1
            for path in PATHS:
                with tempfile.TemporaryDirectory(prefix=f"pmem-bench-{path}-") as d:
                    db = Path(d) / "bench.db"
                    times[path].append(runners[path](db))
                    print(f"  run {rep + 1}/{args.repeat} {path}: {times[path][-1]:.3f} s", file=sys.stderr)
                    if path == "cli" and not rows:
                        rows.extend(event_rows(db))
                        size = store_bytes(db)
                    if path == "cli" and last:
                        verify(db, args.ops, len(set(keys)))
                    if path in ("api", "api-unsealed") and last:
                        reads["sealed" if path == "api" else "unsealed"] = read_figures(db, keys, args.gets, args.seed)
    return times, rows, size, reads


def report_paths(run: Run, args: argparse.Namespace, times: dict[str, list[float]], size: int,
                 reads: dict[str, dict[str, float]]) -> None:
    best = {p: min(ts) for p, ts in times.items()}
    run.table([{"path": p, "seconds": best[p], "events/s": args.ops / best[p], "vs raw": best["raw"] / best[p],
                "vs raw-plain": best["raw-plain"] / best[p], "vs raw-json": best["raw-json"] / best[p]}
               for p in PATHS], f"{args.ops:,} accept operations over {args.keys:,} keys, best of {args.repeat}")
    for path, baseline in (("cli", "raw"), ("api", "raw"), ("cli", "raw-json"), ("api", "raw-json"),
                           ("floor", "raw-json"), ("cli", "raw-plain"), ("api", "api-unsealed")):
        run.beside(f"{path} events/s", args.ops / best[path], f"{baseline} events/s", args.ops / best[baseline],
                   "events/s")
    run.table([{"read": name, "sealed": reads["sealed"][name], "unsealed": reads["unsealed"][name],
                "ratio": reads["sealed"][name] / reads["unsealed"][name]} for name in reads["sealed"]],
              "Reads on the sealed and the unsealed API store (ms; rebuild in s)")
    run.figures |= {"ops": args.ops, "keys": args.keys, "seed": args.seed, "repeat": args.repeat,
                    "cli_peak_rss_mb": round(max(PEAK_RSS) / MIB), "store_bytes_per_event": round(size / args.ops),
                    "paths": {p: {"seconds": best[p], "events_per_s": args.ops / best[p], "all_seconds": times[p]}
                              for p in PATHS}, "reads": reads}
    print(f"CLI peak RSS: {max(PEAK_RSS) / MIB:,.0f} MiB; store: {size / args.ops:,.0f} bytes per event")


def history_sweep(run: Run, args: argparse.Namespace) -> dict[str, list[float]]:
    """``Store.apply`` events/s and the raw insert of the same rows (the baseline) at each history length."""
    out: dict[str, list[float]] = {"history": [], "api": [], "raw": []}
    for h in args.history:
        lines, _ = make_lines(args.ops, max(1, args.ops // h), args.seed)
        with tempfile.TemporaryDirectory(prefix="pmem-bench-sweep-") as d:
            api = min(run_api(lines, Path(d) / f"api{i}.db") for i in range(args.repeat))
            rows = event_rows(Path(d) / "api0.db")
            raw = min(run_raw(rows, Path(d) / f"raw{i}.db") for i in range(args.repeat))
        out["history"].append(h)
        out["api"].append(args.ops / api)
        out["raw"].append(args.ops / raw)
        print(f"  history {h}: api {args.ops / api:,.0f} events/s, raw {args.ops / raw:,.0f}", file=sys.stderr)
    run.table([{"events per cell": h, "cells": args.ops // h, "Store.apply events/s": a, "raw events/s": r,
                "vs raw": a / r} for h, a, r in zip(out["history"], out["api"], out["raw"], strict=True)],
              f"Scaling: {args.ops:,} accept operations, each cell's history longer (best of {args.repeat})")
    run.figures["history_sweep"] = out
    return out


def plot_scaling(sweep: dict[str, list[float]], ops: int, path: Path) -> None:
    def draw(axes: list[Any]) -> None:
        line_panel(axes[0], sweep["history"], {"P-Mem Store.apply (sealed)": sweep["api"],
                                               "raw SQLite insert of the same rows (baseline)": sweep["raw"]},
                   "events per cell (history length, log scale)", "write throughput (events/s)",
                   f"Write throughput as a cell's history grows ({ops:,} operations)", logx=True)
        axes[0].set_ylim(bottom=0)

    print(f"plot: {save_figure(draw, path)}", file=sys.stderr)


def rss(run: Run, batches: list[tuple[int, int]], seed: int) -> None:
    """Peak RSS of ``pmem apply`` of each batch ``(lines, keys)`` of the generator's lines, beside that of
    one line, all in the same run: a streamed batch should not grow with its size."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="pmem-bench-rss-") as d:
        for n_ops, n_keys in [(1, 1), *batches]:
            ops_file, db = Path(d) / f"{n_ops}.jsonl", Path(d) / f"{n_ops}.db"
            ops_file.write_bytes(b"".join(line + b"\n" for line in make_lines(n_ops, n_keys, seed)[0]))
            seconds = run_cli(ops_file, db, n_ops)
            rows.append({"lines": n_ops, "keys": n_keys, "peak RSS MiB": PEAK_RSS[-1] / MIB, "seconds": seconds,
                         "store bytes per event": store_bytes(db) / n_ops,
                         "growth over one line MiB": (PEAK_RSS[-1] - PEAK_RSS[0]) / MIB})
            for p in Path(d).glob(f"{n_ops}.*"):
                p.unlink()
    run.table(rows, "pmem apply: peak RSS by batch size")
    run.figures["rss"] = rows


def thread_overlap(run: Run, rows: list[Row]) -> None:
    """Whether SQLite's inserts can run beside Python work on the other core: ``rows`` inserted 4,096 at a
    time in one transaction, a pure Python loop, then both at once (the inserts in a thread)."""
    def inserts(db: Path) -> None:
        conn = raw_transaction(db, EVENTS_TABLE)
        for start in range(0, len(rows), 4096):
            conn.executemany("INSERT INTO stored_events VALUES (?,?,?,?)", rows[start:start + 4096])
        conn.execute("COMMIT")
        conn.close()

    def python_work() -> None:
        x = 0
        for i in range(20_000_000):
            x += i * i % 7

    def both(db: Path) -> None:
        writer = threading.Thread(target=inserts, args=(db,))
        writer.start()
        python_work()
        writer.join()

    with tempfile.TemporaryDirectory(prefix="pmem-bench-thread-") as d:
        alone, work = timed(lambda: inserts(Path(d) / "a.db")), timed(python_work)
        together = timed(lambda: both(Path(d) / "b.db"))
    run.beside("inserts in a thread beside Python work, s", together, "the two one after the other, s",
               alone + work, "s")


def resend(run: Run, lines: list[bytes], n_ops: int) -> None:
    first, again = run_resend(lines, n_ops)
    run.beside("resend of the same lines with op ids (CLI), s", again, "their first write, s", first, "s")


def batch_sizes(text: str) -> list[tuple[int, int]]:
    """``"200000:40000,1000000:100000"`` -> ``[(200000, 40000), (1000000, 100000)]``."""
    try:
        return [(int(n), int(k)) for n, k in (part.split(":") for part in text.split(","))]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LINES:KEYS[,LINES:KEYS...], got {text!r}") from None


def history_lengths(text: str) -> list[int]:
    try:
        lengths = [int(h) for h in text.split(",")]
    except ValueError:
        lengths = []
    if not lengths or min(lengths) < 1:
        raise argparse.ArgumentTypeError(f"expected positive whole numbers like 1,10,100, got {text!r}")
    return lengths


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ops", type=int, default=200_000, help="operations per run (default 200000)")
    ap.add_argument("--keys", type=int, default=40_000, help="key space to draw from (default 40000)")
    ap.add_argument("--seed", type=int, default=1, help="RNG seed (default 1)")
    ap.add_argument("--repeat", type=int, default=3, help="interleaved repetitions, best kept (default 3)")
    ap.add_argument("--gets", type=int, default=2000, help="random gets per read measurement (default 2000)")
    ap.add_argument("--history", type=history_lengths, default=[1, 10, 100, 1000],
                    help="events per cell in the scaling sweep (default 1,10,100,1000)")
    ap.add_argument("--resend", action="store_true", help="also time a resend of the lines with op ids (CLI)")
    ap.add_argument("--quick", action="store_true", help="50,000 ops, one repetition, 200 gets")
    ap.add_argument("--thread-overlap", action="store_true",
                    help="also time the CLI's event rows inserted in a thread beside Python work, and apart")
    ap.add_argument("--rss-only", action="store_true",
                    help="only the CLI's peak RSS: pmem apply of --ops lines, beside a one-line apply")
    ap.add_argument("--rss-sizes", type=batch_sizes, metavar="LINES:KEYS,...",
                    help="with --rss-only: these batches instead of --ops/--keys, all in the same run "
                         "(e.g. 200000:40000,1000000:100000)")
    ap.add_argument("--sweep", action="store_true",
                    help="only the deployment-scale sweep of pmem apply and pmem rebuild (benchmarks/store_sweep.py)")
    ap.add_argument("--lines", type=int, default=1_000_000, help="with --sweep: lines per row (default 1000000)")
    add_output_options(ap, "store")
    args = ap.parse_args(argv)
    if args.quick:
        args.ops, args.repeat, args.gets = 50_000, 1, 200
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    run = Run("store", args.results)
    os.environ.pop("PMEM_SYNCHRONOUS", None)  # the CLI and the API both default to FULL, like raw
    # An installed P-Mem runs from compiled bytecode (pip writes it at install): a CLI measured with
    # PYTHONDONTWRITEBYTECODE compiles its modules again at every start, which no user's process pays.
    # One warm-up apply writes the cache before anything is timed.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    warm_up_cli()
    if args.sweep:
        sweep(run, args.lines)
        run.finish()
        return
    if args.rss_only:
        rss(run, args.rss_sizes or [(args.ops, args.keys)], args.seed)
        run.finish()
        return
    lines, keys = make_lines(args.ops, args.keys, args.seed)
    times, rows, size, reads = measure_paths(args, lines, keys)
    report_paths(run, args, times, size, reads)
    if args.resend:
        resend(run, lines, args.ops)
    if args.thread_overlap:
        thread_overlap(run, rows)
    plot_scaling(history_sweep(run, args), args.ops, args.plots / "store_scaling.png")
    run.finish()


if __name__ == "__main__":
    main()
