#!/usr/bin/env python3
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
* ``raw-json``: issue 19's baseline: ``raw-plain`` with a ``json.loads`` of each line as it is bound
  (``executemany`` of the JSON lines into a (key, body) table, WAL, ``synchronous=FULL``, one
  transaction).
* ``floor``: the least any sealed write path in Python does per operation, with no deciding, no state,
  no receipts and no checks: each line decoded by ``msgspec`` into a typed struct, the event's fields
  built as a dict, sealed with P-Mem's own ``seal`` (one cipher per cell, built once and held for the
  run; a chunk's nonces taken at once), encoded with ``orjson`` and inserted as ``raw`` inserts its rows.
  What it takes over ``raw`` is about the Python a sealed write cannot avoid: a ``floor`` under 0.3x
  ``raw-json`` says that no Python write path that seals this way reaches issue 19's API goal.
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

``--rss-only`` measures only the CLI's peak RSS (``/usr/bin/time``): ``pmem apply`` of one line, then of
``--ops`` lines over ``--keys`` keys, or of each ``LINES:KEYS`` batch of ``--rss-sizes``, all in the same
run (``--rss-sizes 200000:40000,1000000:100000`` shows whether memory grows with the batch).

Run it with the project's virtualenv (it imports ``pmem``):

    .venv/bin/python scripts/bench_store.py [--ops 200000] [--keys 40000] [--seed 1] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import orjson

import pmem

PATHS = ("cli", "api", "raw", "raw-plain", "raw-json", "api-unsealed", "floor")
EVENTS_TABLE = ("CREATE TABLE stored_events (originator_id TEXT, originator_version INTEGER, topic TEXT, "
                "state BLOB, PRIMARY KEY (originator_id, originator_version))")  # eventsourcing's schema


def make_lines(n_ops: int, n_keys: int, seed: int) -> tuple[list[bytes], list[str]]:
    """N accept operations as JSON lines (no newline), and the key of each."""
    rng = random.Random(seed)
    lines: list[bytes] = []
    keys: list[str] = []
    for _ in range(n_ops):
        key, j = f"key{rng.randrange(n_keys)}", rng.randrange(n_ops)
        lines.append(orjson.dumps({"op": "accept", "key": key, "value": f"value-{j}", "source": "bench"}))
        keys.append(key)
    return lines, keys


PEAK_RSS: list[int] = []  # the CLI runs' peak RSS, bytes


def run_cli(ops_file: Path, db: Path, n_ops: int) -> float:
    """``pmem apply`` as a subprocess; its own peak RSS (``/usr/bin/time``, else ``wait4``) goes to
    :data:`PEAK_RSS`."""
    exe = Path(sys.executable).parent / "pmem"
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        # /usr/bin/time forks the CLI from a small process: wait4 on a child forked from this one
        # would count this process's own memory, copied at the fork, as the child's peak.
        timer = ["/usr/bin/time", "-f", "%M"] if Path("/usr/bin/time").exists() else []
        proc = subprocess.Popen([*timer, str(exe), "apply", str(ops_file), "--db", str(db)], stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        elapsed = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if timer:
        stderr, _, kib = stderr.rstrip().rpartition(b"\n")
        PEAK_RSS.append(int(kib) * 1024)
    else:
        PEAK_RSS.append(usage.ru_maxrss * 1024)
    if proc.returncode != 0:
        raise SystemExit(f"pmem apply exited {proc.returncode}: {stderr.decode(errors='replace')}")
    receipts = sum(1 for line in stdout.split(b"\n") if line.strip())
    if receipts != n_ops:
        raise SystemExit(f"pmem apply printed {receipts} receipts, expected {n_ops}")
    return elapsed


def store_bytes(db: Path) -> int:
    """The store's size on disk: the file and its WAL."""
    return sum(p.stat().st_size for p in (db, Path(f"{db}-wal")) if p.exists())


def warm_up_cli() -> None:
    """One ``pmem apply`` of one line, untimed, so the CLI's modules are compiled before it is timed."""
    with tempfile.TemporaryDirectory(prefix="pmem-bench-warm-") as d:
        ops_file = Path(d) / "one.jsonl"
        ops_file.write_bytes(make_lines(1, 1, 0)[0][0] + b"\n")
        run_cli(ops_file, Path(d) / "warm.db", 1)
        PEAK_RSS.pop()


def run_resend(lines: list[bytes], n_ops: int) -> tuple[float, float]:
    """Seconds of the first write and of the resend of the same lines, each with an ``op_id``."""
    with tempfile.TemporaryDirectory(prefix="pmem-bench-resend-") as d:
        ops_file, db = Path(d) / "ops.jsonl", Path(d) / "bench.db"
        ops_file.write_bytes(b"".join(line[:-1] + b',"op_id":"m%d"}\n' % i for i, line in enumerate(lines)))
        first = run_cli(ops_file, db, n_ops)
        again = run_cli(ops_file, db, n_ops)
        with pmem.open(db) as store:
            if store.last_index() != n_ops:
                raise SystemExit(f"the resend appended events: last_index={store.last_index()}")
    return first, again


def run_api(lines: list[bytes], db: Path, sealed: bool = True) -> float:
    t0 = time.perf_counter()
    ops = [orjson.loads(line) for line in lines]
    store = pmem.open(db)
    store.log_store.sealing = sealed
    store.apply(ops)
    store.close()
    return time.perf_counter() - t0


def event_rows(db: Path) -> list[tuple[str, int, str, bytes]]:
    """The exact rows P-Mem stored, in log order (read back once, untimed, from a CLI-written store)."""
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT originator_id, originator_version, topic, state FROM stored_events "
                        "ORDER BY rowid").fetchall()
    conn.close()
    return rows


def run_raw(rows: list[tuple[str, int, str, bytes]], db: Path) -> float:
    """The same event rows into the same table, one executemany in one transaction."""
    t0 = time.perf_counter()
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(EVENTS_TABLE)
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO stored_events VALUES (?,?,?,?)", rows)
    conn.execute("COMMIT")
    elapsed = time.perf_counter() - t0
    conn.close()
    return elapsed


class _Line(msgspec.Struct):
    op: str
    key: str
    value: str
    source: str | None = None


def run_floor(lines: list[bytes], db: Path) -> float:
    """The ``floor`` path (see the module's docstring): decode, build, seal, encode and insert, nothing else."""
    from pmem.adapters.eventstore.codec import CLASS_VERSION, encode_state, timestamp_envelope
    from pmem.adapters.eventstore.gc_pause import no_gc
    from pmem.adapters.eventstore.sealing import new_key, nonces, seal
    from pmem.domain.keys import cell_id

    t0 = time.perf_counter()
    decoder = msgspec.json.Decoder(_Line)
    stamp = timestamp_envelope(datetime.now(UTC))
    cells: dict[str, tuple[str, list[int], Any]] = {}  # key -> (cell id hex, [revision], cipher)
    pool = nonces(len(lines))

    def rows() -> Iterator[tuple[str, int, str, bytes]]:
        for i, line in enumerate(lines):
            op = decoder.decode(line)
            cell = cells.get(op.key)
            if cell is None:
                cell = cells[op.key] = (cell_id("default", op.key).hex, [0], new_key(1)[0])
            hexid, revision, key = cell
            revision[0] += 1
            fields = {"namespace": "default", "key": op.key, "requested": op.op, "reason": None, "text": None,
                      "source": op.source, "trust": 50, "observed_at": None, "op_id": None, "node_type": None,
                      "value": op.value, "vid": revision[0] - 1, "supersedes": None, "timestamp": stamp}
            seal(fields, hexid, revision[0], key, pool[12 * i:12 * i + 12])
            yield hexid, revision[0], "pmem.cell/Accepted", encode_state(fields, CLASS_VERSION)

    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(EVENTS_TABLE)
    conn.execute("BEGIN")
    with no_gc():  # as P-Mem's write path: the collector would walk the whole heap, finding nothing
        conn.executemany("INSERT INTO stored_events VALUES (?,?,?,?)", rows())
    conn.execute("COMMIT")
    elapsed = time.perf_counter() - t0
    conn.close()
    return elapsed


def _raw_insert(db: Path, rows: Iterable[tuple[str, bytes]]) -> float:
    """Seconds to insert ``rows`` (key, body) into a plain table with no index: WAL, ``synchronous=FULL``,
    one transaction (the raw baselines)."""
    t0 = time.perf_counter()
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE ops (key TEXT, body BLOB)")
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO ops (key, body) VALUES (?, ?)", rows)
    conn.execute("COMMIT")
    elapsed = time.perf_counter() - t0
    conn.close()
    return elapsed


def run_raw_plain(lines: list[bytes], keys: list[str], db: Path) -> float:
    """The input JSON lines into a plain table with no index: the cheapest possible store."""
    return _raw_insert(db, zip(keys, lines, strict=True))


def run_raw_json(lines: list[bytes], keys: list[str], db: Path) -> float:
    """Issue 19's baseline: the input lines into a (key, body) table, a ``json.loads`` of each as it is bound."""
    return _raw_insert(db, ((json.loads(line)["key"], line) for line in lines))


def read_figures(db: Path, keys: list[str], n_gets: int, seed: int) -> dict[str, float]:
    """``get`` p50/p99 (ms) through the projection and through the replay reader, and the seconds of a
    frontier rebuild, on the store ``db``."""
    rng = random.Random(seed)
    wanted = [rng.choice(keys) for _ in range(n_gets)]
    out: dict[str, float] = {}
    for reader, n in (("projection", n_gets), ("replay", max(1, n_gets // 4))):
        with pmem.open(db, reader=reader) as store:
            store.get(wanted[0])  # catch up, open the log
            lat = []
            for key in wanted[:n]:
                t0 = time.perf_counter()
                store.get(key)
                lat.append((time.perf_counter() - t0) * 1000)
        lat.sort()
        out[f"{reader}_p50_ms"], out[f"{reader}_p99_ms"] = lat[len(lat) // 2], lat[int(len(lat) * 0.99) - 1]
    with pmem.open(db) as store:
        t0 = time.perf_counter()
        store.rebuild("frontier")
        out["rebuild_s"] = time.perf_counter() - t0
    return out


def print_sealing(times: dict[str, list[float]], n_ops: int, reads: dict[str, dict[str, float]]) -> None:
    sealed, plain = min(times["api"]), min(times["api-unsealed"])
    print(f"\nsealing, side by side: Store.apply {n_ops / sealed:,.0f} events/s sealed, {n_ops / plain:,.0f} "
          f"unsealed ({sealed / plain:.3f}x the time)")
    print(f"{'read':<24} {'sealed':>10} {'unsealed':>10} {'ratio':>7}")
    for name in reads["sealed"]:
        a, b = reads["sealed"][name], reads["unsealed"][name]
        print(f"{name:<24} {a:>10.3f} {b:>10.3f} {a / b:>7.3f}")


def verify(db: Path, n_ops: int, n_distinct: int) -> None:
    with pmem.open(db) as store:
        last, cells = store.last_index(), len(store.frontier())
    if last != n_ops or cells != n_distinct:
        raise SystemExit(f"verify failed: last_index={last} (want {n_ops}), frontier={cells} (want {n_distinct})")
    print(f"verified CLI store: last_index={last}, frontier cells={cells}")


def print_rss(batches: list[tuple[int, int]], seed: int) -> None:
    """Peak RSS of ``pmem apply`` of each batch ``(lines, keys)`` of the generator's lines, and of one
    line first, all in the same run: a streamed batch should not grow with its size (issue 19's goal:
    <= 300 MB at 1,000,000 lines)."""
    with tempfile.TemporaryDirectory(prefix="pmem-bench-rss-") as d:
        runs = [("one line", 1, 1)] + [(f"{n:,} lines over {k:,} keys", n, k) for n, k in batches]
        for name, n_ops, n_keys in runs:
            batch = make_lines(n_ops, n_keys, seed)[0]
            ops_file, db = Path(d) / f"{n_ops}.jsonl", Path(d) / f"{n_ops}.db"
            ops_file.write_bytes(b"".join(line + b"\n" for line in batch))
            del batch
            seconds = run_cli(ops_file, db, n_ops)
            ops_file.unlink()
            print(f"pmem apply, {name}: peak RSS {PEAK_RSS[-1] / 2**20:,.0f} MiB, {seconds:.1f} s, "
                  f"{store_bytes(db) / n_ops:,.0f} store bytes per event", flush=True)
            for p in Path(d).glob(f"{n_ops}.db*"):
                p.unlink()
    for (name, *_), rss in zip(runs[1:], PEAK_RSS[1:], strict=True):
        print(f"peak RSS growth, {name}: {(rss - PEAK_RSS[0]) / 2**20:,.0f} MiB over the one-line run")


def print_thread_overlap(rows: list[tuple[str, int, str, bytes]]) -> None:
    """Whether SQLite's inserts can run beside Python work on the other core: ``rows`` inserted 4,096 at a
    time in one transaction, a pure Python loop, then both at once (the inserts in a thread)."""
    def inserts(db: Path) -> None:
        conn = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute(EVENTS_TABLE)
        conn.execute("BEGIN")
        for start in range(0, len(rows), 4096):
            conn.executemany("INSERT INTO stored_events VALUES (?,?,?,?)", rows[start:start + 4096])
        conn.execute("COMMIT")
        conn.close()

    def python_work() -> None:
        x = 0
        for i in range(20_000_000):
            x += i * i % 7

    with tempfile.TemporaryDirectory(prefix="pmem-bench-thread-") as d:
        t0 = time.perf_counter()
        inserts(Path(d) / "a.db")
        alone = time.perf_counter() - t0
        t0 = time.perf_counter()
        python_work()
        work = time.perf_counter() - t0
        t0 = time.perf_counter()
        writer = threading.Thread(target=inserts, args=(Path(d) / "b.db",))
        writer.start()
        python_work()
        writer.join()
        both = time.perf_counter() - t0
    print(f"inserts in a thread beside Python work: inserts {alone:.3f} s, Python {work:.3f} s, "
          f"sum {alone + work:.3f} s, both at once {both:.3f} s")


def batch_sizes(text: str) -> list[tuple[int, int]]:
    """``"200000:40000,1000000:100000"`` -> ``[(200000, 40000), (1000000, 100000)]``."""
    try:
        return [(int(n), int(k)) for n, k in (part.split(":") for part in text.split(","))]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LINES:KEYS[,LINES:KEYS...], got {text!r}") from None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ops", type=int, default=200_000, help="operations per run (default 200000)")
    ap.add_argument("--keys", type=int, default=40_000, help="key space to draw from (default 40000)")
    ap.add_argument("--seed", type=int, default=1, help="RNG seed (default 1)")
    ap.add_argument("--repeat", type=int, default=3, help="interleaved repetitions, best kept (default 3)")
    ap.add_argument("--gets", type=int, default=2000, help="random gets per read measurement (default 2000)")
    ap.add_argument("--json", type=Path, metavar="PATH", help="also write the figures as JSON here")
    ap.add_argument("--resend", action="store_true", help="also time a resend of the lines with op ids (CLI)")
    ap.add_argument("--quick", action="store_true", help="50,000 ops, one repetition, 200 gets")
    ap.add_argument("--thread-overlap", action="store_true",
                    help="also time the CLI's event rows inserted in a thread beside Python work, and apart")
    ap.add_argument("--rss-only", action="store_true",
                    help="only the CLI's peak RSS: pmem apply of --ops lines, beside a one-line apply")
    ap.add_argument("--rss-sizes", type=batch_sizes, metavar="LINES:KEYS,...",
                    help="with --rss-only: these batches instead of --ops/--keys, all in the same run "
                         "(e.g. 200000:40000,1000000:100000)")
    args = ap.parse_args()
    if args.quick:
        args.ops, args.repeat, args.gets = 50_000, 1, 200
    os.environ.pop("PMEM_SYNCHRONOUS", None)  # the CLI and the API both default to FULL, like raw
    # An installed P-Mem runs from compiled bytecode (pip writes it at install): a CLI measured with
    # PYTHONDONTWRITEBYTECODE compiles its modules again at every start (about 0.3 s here), which no
    # user's process pays. One warm-up apply writes the cache before anything is timed.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    warm_up_cli()

    if args.rss_only:
        print_rss(args.rss_sizes or [(args.ops, args.keys)], args.seed)
        return
    lines, keys = make_lines(args.ops, args.keys, args.seed)
    n_distinct = len(set(keys))
    times: dict[str, list[float]] = {p: [] for p in PATHS}
    with tempfile.TemporaryDirectory(prefix="pmem-bench-ops-") as ops_dir:
        ops_file = Path(ops_dir) / "ops.jsonl"
        ops_file.write_bytes(b"".join(line + b"\n" for line in lines))
        rows: list[tuple[str, int, str, bytes]] = []
        size = 0
        runners: dict[str, Callable[[Path], float]] = {
            "cli": lambda db: run_cli(ops_file, db, args.ops),
            "api": lambda db: run_api(lines, db),
            "raw": lambda db: run_raw(rows, db),
            "raw-plain": lambda db: run_raw_plain(lines, keys, db),
            "raw-json": lambda db: run_raw_json(lines, keys, db),
            "api-unsealed": lambda db: run_api(lines, db, sealed=False),
            "floor": lambda db: run_floor(lines, db),
        }
        reads: dict[str, dict[str, float]] = {}
        for rep in range(args.repeat):
            for path in PATHS:
                with tempfile.TemporaryDirectory(prefix=f"pmem-bench-{path}-") as d:
                    db = Path(d) / "bench.db"
                    times[path].append(runners[path](db))
                    print(f"  run {rep + 1}/{args.repeat} {path}: {times[path][-1]:.3f} s", file=sys.stderr)
                    if path == "cli" and not rows:
                        rows.extend(event_rows(db))
                        size = store_bytes(db)
                    if path == "cli" and rep == args.repeat - 1:
                        verify(db, args.ops, n_distinct)
                    if path in ("api", "api-unsealed") and rep == args.repeat - 1:
                        reads["sealed" if path == "api" else "unsealed"] = read_figures(db, keys, args.gets, args.seed)

    best = {p: min(ts) for p, ts in times.items()}
    print(f"\n{args.ops} accept ops over {n_distinct} distinct keys (K={args.keys}, seed={args.seed}), "
          f"best of {args.repeat}")
    print(f"{'path':<13} {'seconds':>9} {'events/s':>11} {'vs raw':>7} {'vs plain':>9} {'vs json':>8}")
    for p in PATHS:
        print(f"{p:<13} {best[p]:>9.3f} {args.ops / best[p]:>11,.0f} {best['raw'] / best[p]:>7.3f} "
              f"{best['raw-plain'] / best[p]:>9.3f} {best['raw-json'] / best[p]:>8.3f}")
    ratio = best["raw"] / best["cli"]
    print(f"CLI/raw-json ratio: {best['raw-json'] / best['cli']:.3f}, API/raw-json ratio: "
          f"{best['raw-json'] / best['api']:.3f} (issue 19's baseline: the lines into (key, body), json.loads each)")
    print(f"floor/raw-json ratio: {best['raw-json'] / best['floor']:.3f} (decode, seal, encode and insert alone: "
          "about the most a sealed Python write path can reach)")
    print(f"CLI peak RSS: {max(PEAK_RSS) / 2**20:,.0f} MiB; store: {size / args.ops:,.0f} bytes per event")
    resend = run_resend(lines, args.ops) if args.resend else None
    if resend is not None:
        print(f"resend with op ids (CLI): first write {resend[0]:.3f} s, resend {resend[1]:.3f} s: "
              f"{resend[1] / resend[0]:.2f}x the first write")
    print(f"CLI/raw ratio: {ratio:.2f} (goal >= 0.15; raw = the same event rows into the same table)")
    print(f"CLI/raw-plain ratio: {best['raw-plain'] / best['cli']:.2f} (plain = the input lines, no index)")
    print_sealing(times, args.ops, reads)
    if args.thread_overlap:
        print_thread_overlap(rows)

    if args.json:
        figures = {
            "ops": args.ops, "keys": args.keys, "distinct_keys": n_distinct, "seed": args.seed,
            "repeat": args.repeat, "cli_raw_ratio": ratio,
            "cli_raw_json_ratio": best["raw-json"] / best["cli"], "api_raw_json_ratio": best["raw-json"] / best["api"],
            "cli_peak_rss_bytes": max(PEAK_RSS), "store_bytes_per_event": size / args.ops,
            "resend_seconds": resend,
            "cli_raw_plain_ratio": best["raw-plain"] / best["cli"],
            "paths": {p: {"seconds": best[p], "events_per_s": args.ops / best[p],
                          "ratio_to_raw": best["raw"] / best[p], "all_seconds": times[p]} for p in PATHS},
            "reads": reads,
        }
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
