"""The write path at deployment scale: ``pmem apply`` and ``pmem rebuild`` of the same number of lines
over few keys (long histories), many keys, one key per line, and a mix whose revokes walk back along
long histories, in one run; each row printed with ops/s, peak RSS and bytes per event, beside the best
row of the run (the goal: every row at least 0.7x the best row's ops/s, peak RSS at most 300 MB).

Beside each row, the same lines through the bounded sealed floor (``run_floor(..., bounded=True)`` of
:mod:`benchmarks.store_paths`: decode, seal under the cell's own key, encode, insert, a new cell's key
stored, ciphers held for as many cells as a streamed batch holds; no deciding, no cell state): what a row
costs any Python write path that seals per cell, and P-Mem's time over it (``apply vs floor``). A row whose
floor is under 0.7x the best row's floor cannot reach the goal by cutting P-Mem's own work. And ``raw``:
the event rows P-Mem wrote, inserted by ``sqlite3`` alone into the same schema in one transaction
(``run_raw``, with a streamed batch's page cache), what the row costs SQLite with no Python at all. Beside
the rebuild, its read floor (``run_read_floor``): every event read as the rebuild reads it, decoded and
opened with its cell's key, in one process, nothing folded or written.

Each row is a fresh SQLite store in a fresh temporary directory: ``pmem apply FILE`` of ``--lines``
JSON lines, then ``pmem rebuild --projection frontier`` (every event read, decoded and folded again),
both as subprocesses of the installed entry point. The peak RSS of a run is that of all its processes
at once (a parallel rebuild's workers included: :func:`timed_cli`).

    .venv/bin/python -m benchmarks.store --sweep [--lines 1000000]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from benchmarks.harness import Run
from benchmarks.store_paths import PMEM_BIN, event_rows, run_floor, run_raw, run_read_floor, store_bytes
from pmem.adapters.eventstore.sqlite_log import STREAM_CACHE_KIB

MB = 10**6
SAMPLE_S = 0.02  # seconds between two samples of a run's resident memory
FEW_KEYS = 1_000
MANY_KEYS = 100_000
TAIL = 0.3  # the mix's last rounds: revokes only, walking each cell back this share of its history


def _accepts(n: int, keys: int) -> Iterator[dict[str, Any]]:
    """``n`` accepts, round-robin over ``keys`` keys: each key's history grows evenly."""
    for i in range(n):
        yield {"op": "accept", "key": f"key{i % keys}", "value": f"value-{i}", "source": "bench"}


def _mix(n: int, keys: int) -> Iterator[dict[str, Any]]:
    """Rounds over ``keys`` keys: 15 of accepts then 5 of revokes, and the last :data:`TAIL` of the
    rounds all revokes, so the last revokes reinstate values displaced hundreds of versions before."""
    rounds = max(1, n // keys)
    for i in range(n):
        r = i // keys
        if r >= rounds * (1 - TAIL) or r % 20 >= 15:
            yield {"op": "revoke", "key": f"key{i % keys}", "source": "bench"}
        else:
            yield {"op": "accept", "key": f"key{i % keys}", "value": f"value-{i}", "source": "bench"}


def rows_for(lines: int) -> list[tuple[str, int, Iterator[dict[str, Any]]]]:
    few, many = min(FEW_KEYS, lines), min(MANY_KEYS, lines)
    return [(f"accepts over {few:,} keys", few, _accepts(lines, few)),
            (f"accepts over {many:,} keys", many, _accepts(lines, many)),
            (f"accepts over {lines:,} keys", lines, _accepts(lines, lines)),
            (f"mix with revokes over {few:,} keys", few, _mix(lines, few))]


def tree_rss(pid: int) -> tuple[int, int]:
    """Bytes resident now in process ``pid`` and all its descendants, summed (a parallel rebuild's
    workers hold memory of their own), and the largest peak of any one of them (``VmHWM``: it starts
    afresh at ``exec``), from /proc."""
    total, peak, todo = 0, 0, [pid]
    while todo:
        p = todo.pop()
        try:
            status = Path(f"/proc/{p}/status").read_text()
            for task in os.listdir(f"/proc/{p}/task"):
                todo.extend(int(c) for c in Path(f"/proc/{p}/task/{task}/children").read_text().split())
        except (FileNotFoundError, ProcessLookupError):
            continue  # it ended between two reads
        kib = {k: int(v.split()[0]) for k, _, v in (line.partition(":") for line in status.splitlines())
               if k in ("VmRSS", "VmHWM")}
        total += kib.get("VmRSS", 0) * 1024
        peak = max(peak, kib.get("VmHWM", 0) * 1024)
    return total, peak


def timed_cli(args: list[str]) -> tuple[float, int, bytes]:
    """Seconds, peak RSS in bytes and stdout of ``pmem ARGS``. The peak is that of all its processes
    together: their summed RSS sampled every :data:`SAMPLE_S`, or the largest peak one of them reached,
    where that is more. (Not ``wait4``'s or ``/usr/bin/time``'s figure: the first carries this
    process's own peak into the child across ``exec``, the second is one process's alone.)"""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen([str(PMEM_BIN), *args], stdout=out, stderr=err)
        peak, done = 0, threading.Event()

        def sample() -> None:
            nonlocal peak
            while not done.wait(SAMPLE_S):
                peak = max(peak, *tree_rss(proc.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        proc.wait()
        seconds = time.perf_counter() - t0
        done.set()
        sampler.join()
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(f"pmem {args[0]} exited {proc.returncode}: {err.read().decode(errors='replace')[-2000:]}")
        return seconds, peak, out.read()


def measure_row(name: str, keys: int, ops: Iterator[dict[str, Any]], lines: int) -> dict[str, Any]:
    """One workload's figures: ``pmem apply`` and ``pmem rebuild`` of a fresh store, then the floors and
    the bare insert of the same lines and rows."""
    with tempfile.TemporaryDirectory(prefix="pmem-bench-scale-") as d:
        ops_file, db = Path(d) / "ops.jsonl", Path(d) / "store.db"
        ops_file.write_bytes(b"".join(orjson.dumps(op) + b"\n" for op in ops))
        apply_s, apply_rss, stdout = timed_cli(["apply", str(ops_file), "--db", str(db)])
        receipts = stdout.count(b"\n")
        if receipts != lines:
            raise SystemExit(f"pmem apply printed {receipts} receipts, expected {lines}")
        size = store_bytes(db)
        rebuild_s, rebuild_rss, _ = timed_cli(["rebuild", "--db", str(db), "--projection", "frontier", "-q"])
        read_s = run_read_floor(db)
        floor_s = run_floor(ops_file.read_bytes().splitlines(), Path(d) / "floor.db", bounded=True)
        raw_s = run_raw(event_rows(db), Path(d) / "raw.db", STREAM_CACHE_KIB)
    row = {"workload": name, "lines": lines, "keys": keys, "apply ops/s": lines / apply_s,
           "apply peak RSS MB": apply_rss / MB, "bytes per event": size / lines,
           "rebuild events/s": lines / rebuild_s, "rebuild peak RSS MB": rebuild_rss / MB,
           "floor ops/s": lines / floor_s, "apply vs floor": floor_s / apply_s, "raw rows/s": lines / raw_s,
           "read floor events/s": lines / read_s}
    print(f"  {name}: apply {row['apply ops/s']:,.0f} ops/s, {row['apply peak RSS MB']:.0f} MB; rebuild "
          f"{row['rebuild events/s']:,.0f} events/s, {row['rebuild peak RSS MB']:.0f} MB; floor "
          f"{row['floor ops/s']:,.0f} ops/s; raw {row['raw rows/s']:,.0f} rows/s; read floor "
          f"{row['read floor events/s']:,.0f} events/s", file=sys.stderr)
    return row


def sweep(run: Run, lines: int) -> list[dict[str, Any]]:
    """One row per workload: apply and rebuild figures, each beside the best row of the run, and the
    floors beside theirs."""
    out = [measure_row(name, keys, ops, lines) for name, keys, ops in rows_for(lines)]
    for figure in ("apply ops/s", "rebuild events/s", "floor ops/s", "raw rows/s", "read floor events/s"):
        best = max(r[figure] for r in out)
        for r in out:
            r[f"{figure.split()[0]} vs best"] = r[figure] / best
            run.beside(f"{r['workload']}: {figure}", r[figure], f"the best row's {figure}", best, figure.split()[1])
    run.table(out, f"pmem apply and pmem rebuild at scale: {lines:,} lines per row (goal: each row >= 0.7x the "
                   "best, peak RSS <= 300 MB)")
    run.figures["scale_sweep"] = out
    return out
