"""Export and import throughput and peak memory, next to the raw insert of the same rows, in one run.

A source SQLite store of ``--events`` events (default 1,000,000; ``--quick``: 50,000) is written through
the write path (sealed events, a quarter of them with op ids, over ``--cells`` cells). Then, each in a
process of its own (so each peak RSS, ``VmHWM``, is its own):

* ``export``: ``pmem export`` of the source to a file (events/s, peak RSS);
* ``import-sqlite``: the log part of ``pmem import`` of that file into a new SQLite file (parse, check,
  insert, one transaction; events/s, peak RSS), beside ``raw-sqlite``: one ``executemany`` of the same
  rows, read from the source, into the same table of a new file (synchronous=FULL for both);
* ``import-pg`` beside ``raw-pg``: the same into a new PostgreSQL schema, the raw one a binary ``COPY``
  (``--pg URL``, else ``$PMEM_TEST_PG``; without either the PostgreSQL rows are left out);
* ``import+rebuild``: all of ``pmem import`` into a new SQLite file in one process: the log part, then
  the rebuild of the projections (frontier, graph, lexical; the path of ``pmem rebuild``) (wall time,
  peak RSS); then the same rebuild again on that store, part by part (the frontier's parallel fold;
  graph and full-text in one shared pass over the log).

The ratio column is the import's events/s over the raw insert's. Goals: ratio >= 0.5, peak RSS <= 300 MB.
The machine is shared: the ratio, measured in the same run, is what holds.

    .venv/bin/python -m benchmarks.portability [--quick] [--events N] [--pg URL] [--no-rebuild] [--source DB]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any

from benchmarks.harness import ROOT, Run, add_output_options, peak_rss_mb

BATCH = 10_000


def make_source(path: str, events: int, cells: int) -> None:
    import pmem

    with pmem.open(path) as store:
        for lo in range(0, events, BATCH):
            store.apply([{"op": "accept" if i % 3 else "contest", "key": f"c{i % cells}", "value": f"value {i}",
                          "text": f"observation {i}", **({"op_id": f"op-{i}"} if i % 4 == 0 else {})}
                         for i in range(lo, min(lo + BATCH, events))])


def source_rows(path: str) -> Any:
    conn = sqlite3.connect(path)
    from pmem.adapters.eventstore.log_sql import LogSql, SqliteDialect

    log = LogSql(SqliteDialect()).log
    return conn.execute(f"SELECT {log.verbatim_columns()} FROM {log.d.events} ORDER BY {log.d.index}")


def phase_source(path: str, events: str, cells: str) -> int:
    make_source(path, int(events), int(cells))
    return int(events)


def phase_export(source: str, out: str) -> int:
    from pmem.adapters.service.portability import export_lines

    n = 0
    with open(out, "wb") as fh:
        for line in export_lines(source):
            fh.write(line)
            n += line.startswith(b'{"i"')
    return n


def phase_import(target: str, file: str) -> int:
    from pmem.adapters.service.portability import import_log

    with open(file, "rb") as fh:
        return int(import_log(target, fh, file)["imported"])


def phase_raw_sqlite(target: str, source: str) -> int:
    from pmem.adapters.eventstore.eventlog import EventLog
    from pmem.adapters.eventstore.log_sql import LogSql, SqliteDialect

    EventLog(target).close()  # the same tables
    conn = sqlite3.connect(target, isolation_level=None)
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("BEGIN IMMEDIATE")
    log = LogSql(SqliteDialect()).log
    columns = log.verbatim_columns()
    conn.executemany(f"INSERT INTO {log.d.events} ({columns}) VALUES ({','.join('?' * len(columns.split(',')))})",
                     source_rows(source))
    conn.execute("COMMIT")
    return int(conn.execute(f"SELECT COUNT(*) FROM {log.d.events}").fetchone()[0])


def phase_raw_pg(target: str, source: str) -> int:
    from pmem.adapters.eventstore.eventlog import EventLog
    from pmem.adapters.eventstore.portable_sql import PG_EVENTS, PgSink

    EventLog(target).close()
    from pmem.adapters.storage.backend import PgBackend

    b = PgBackend.from_url(target)
    sink = PgSink(b.conninfo, b.schema, b.label)
    sink.events((i, uuid.UUID(c), r, t, s) for i, c, r, t, s in source_rows(source))
    sink.commit()
    import psycopg

    with psycopg.connect(**b.conninfo) as conn:
        return int(conn.execute(f'SELECT COUNT(*) FROM "{b.schema}".{PG_EVENTS}').fetchone()[0])


def phase_import_rebuild(target: str, file: str) -> dict[str, Any]:
    """All of ``pmem import`` in one process (its peak RSS is the command's): the log part, then the
    rebuild (``portability.rebuild``: the path of ``pmem rebuild``), with the time of each part."""
    from pmem.adapters.service.portability import import_log, rebuild

    t0 = time.perf_counter()
    with open(file, "rb") as fh:
        events = int(import_log(target, fh, file)["imported"])
    t1 = time.perf_counter()
    rebuild(target)
    return {"events": events, "log_s": t1 - t0, "rebuild_s": time.perf_counter() - t1}


def phase_rebuild_parts(target: str) -> dict[str, Any]:
    """The same rebuild again on the imported store, each part timed: the frontier (its parallel fold)
    and graph with full-text (one shared pass over the log), as ``pmem rebuild --projection`` runs them."""
    from pmem.adapters.service.store import Store

    out: dict[str, Any] = {}
    with Store(target) as store:
        for names in (("frontier",), ("graph", "lexical")):
            t0 = time.perf_counter()
            out["events"] = store._admin.rebuild_selected(names)
            out["+".join(names) + "_s"] = time.perf_counter() - t0
    return out


PHASES = {"source": phase_source, "export": phase_export, "import": phase_import, "raw-sqlite": phase_raw_sqlite,
          "raw-pg": phase_raw_pg, "import-rebuild": phase_import_rebuild, "rebuild-parts": phase_rebuild_parts}


def child(name: str, args: list[str]) -> None:
    t0 = time.perf_counter()
    found = PHASES[name](*args)
    seconds = time.perf_counter() - t0
    out = found if isinstance(found, dict) else {"events": found}
    print(json.dumps({**out, "seconds": seconds, "rss_mb": peak_rss_mb()}))


def run_phase(name: str, *args: str) -> dict[str, Any]:
    r = subprocess.run([sys.executable, "-m", "benchmarks.portability", "--phase", name, *args], capture_output=True,
                       text=True, cwd=ROOT)
    if r.returncode != 0:
        raise SystemExit(f"phase {name} failed: {r.stderr[-2000:]}")
    out: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
    out["ev_s"] = out["events"] / out["seconds"]
    return out


def row(label: str, m: dict[str, Any], raw: dict[str, Any] | None = None) -> dict[str, Any]:
    """A table row: the phase's figures, and the raw insert's events/s beside them when it has a baseline."""
    return {"phase": label, "events": m["events"], "s": m["seconds"], "events/s": m["ev_s"],
            "raw events/s": raw["ev_s"] if raw else None, "ratio": m["ev_s"] / raw["ev_s"] if raw else None,
            "peak RSS MB": m["rss_mb"]}


def drop_schema(url: str) -> None:
    import psycopg

    from pmem.adapters.storage.backend import PgBackend

    b = PgBackend.from_url(url)
    with psycopg.connect(**b.conninfo, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{b.schema}" CASCADE')


def measure(a: argparse.Namespace, d: str, run: Run) -> list[dict[str, Any]]:
    """Every phase, each in a process of its own; the table's rows."""
    events, cells = (50_000, 10_000) if a.quick else (a.events, a.cells)
    source, file = a.source or f"{d}/source.db", f"{d}/export.jsonl"
    if a.source is None:
        made = run_phase("source", source, str(events), str(cells))
        print(f"source: {events:,} events over {cells:,} cells written in {made['seconds']:.0f} s "
              f"(peak RSS {made['rss_mb']:.0f} MB)", file=sys.stderr)
    rows = [row("export", run_phase("export", source, file))]
    run.figures["export_file_mb"] = round(os.path.getsize(file) / 1e6)
    raw = run_phase("raw-sqlite", f"{d}/raw.db", source)
    rows += [row("raw-sqlite", raw), row("import-sqlite", run_phase("import", f"{d}/imported.db", file), raw)]
    if a.pg:
        urls = [f"{a.pg}?schema=bench_{uuid.uuid4().hex[:10]}" for _ in range(2)]
        try:
            raw_pg = run_phase("raw-pg", urls[0], source)
            rows += [row("raw-pg", raw_pg), row("import-pg", run_phase("import", urls[1], file), raw_pg)]
        finally:
            for url in urls:
                drop_schema(url)
    if a.rebuild:
        rebuilt = f"{d}/rebuilt.db"
        whole = run_phase("import-rebuild", rebuilt, file)
        rows.append(row("import+rebuild", whole))
        parts = run_phase("rebuild-parts", rebuilt)
        run.figures["rebuild"] = {"log_s": whole["log_s"], "rebuild_s": whole["rebuild_s"],
                                  "frontier_s": parts["frontier_s"], "graph+lexical_s": parts["graph+lexical_s"],
                                  "events": parts["events"]}
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--cells", type=int, default=100_000)
    ap.add_argument("--quick", action="store_true", help="50,000 events (under 2 minutes)")
    ap.add_argument("--pg", default=os.environ.get("PMEM_TEST_PG"), help="PostgreSQL URL (a fresh schema per run)")
    ap.add_argument("--no-rebuild", dest="rebuild", action="store_false")
    ap.add_argument("--source", help="an existing source store to export (its size wins over --events)")
    ap.add_argument("--phase", nargs="+", help=argparse.SUPPRESS)
    add_output_options(ap, "portability")
    a = ap.parse_args(argv)
    if a.phase:
        child(a.phase[0], a.phase[1:])
        return
    run = Run("portability", a.results)
    with tempfile.TemporaryDirectory(prefix="pmem-bench-port-") as d:
        rows = measure(a, d, run)
    run.table(rows, "Export and import, each phase in a process of its own")
    run.figures["phases"] = rows
    for r in rows:
        if r["raw events/s"]:
            run.beside(f"{r['phase']} events/s", r["events/s"], "raw insert of the same rows events/s",
                       r["raw events/s"], "events/s")
    run.finish()

if __name__ == "__main__":
    main()
