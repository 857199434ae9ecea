"""The write paths ``benchmarks.store`` times: the same ``accept`` operations through P-Mem's CLI and API,
and the raw SQLite baselines (see that module's docstring for what each path stores)."""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import orjson

import pmem
from pmem.adapters.eventstore.log_sql import EVENT_COLUMNS, SQLITE_EVENTS

PMEM_BIN = Path(sys.executable).parent / "pmem"
# eventsourcing's schema, its table and column names as the log's SQL writes them (log_sql)
EVENTS_TABLE = (f"CREATE TABLE {SQLITE_EVENTS} ("
                + ", ".join(f"{c} {t}" for c, t in zip(EVENT_COLUMNS, ("TEXT", "INTEGER", "TEXT", "BLOB"), strict=True))
                + f", PRIMARY KEY ({', '.join(EVENT_COLUMNS[:2])}))")
INSERT_EVENTS = f"INSERT INTO {SQLITE_EVENTS} VALUES ({','.join('?' * len(EVENT_COLUMNS))})"
PLAIN_TABLE = "CREATE TABLE ops (key TEXT, body BLOB)"
Row = tuple[str, int, str, bytes]
PEAK_RSS: list[int] = []  # the CLI runs' peak RSS, bytes


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


def run_cli(ops_file: Path, db: Path, n_ops: int) -> float:
    """``pmem apply`` as a subprocess; its own peak RSS (``/usr/bin/time``, else ``wait4``) goes to
    :data:`PEAK_RSS`."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        # /usr/bin/time forks the CLI from a small process: wait4 on a child forked from this one
        # would count this process's own memory, copied at the fork, as the child's peak.
        timer = ["/usr/bin/time", "-f", "%M"] if Path("/usr/bin/time").exists() else []
        proc = subprocess.Popen([*timer, str(PMEM_BIN), "apply", str(ops_file), "--db", str(db)], stdout=out,
                                stderr=err)
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


def event_rows(db: Path) -> list[Row]:
    """The exact rows P-Mem stored, in log order (read back once, untimed, from a P-Mem store)."""
    conn = sqlite3.connect(db)
    rows = conn.execute(f"SELECT {', '.join(EVENT_COLUMNS)} FROM {SQLITE_EVENTS} ORDER BY rowid").fetchall()
    conn.close()
    return rows


def raw_transaction(db: Path, schema: str) -> sqlite3.Connection:
    """A new SQLite file as the baselines write it: WAL, ``synchronous=FULL``, ``schema``, one open transaction."""
    conn = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(schema)
    conn.execute("BEGIN")
    return conn


def commit_and_close(conn: sqlite3.Connection, t0: float) -> float:
    """Commit, and the seconds since ``t0``; the close after it is not timed."""
    conn.execute("COMMIT")
    elapsed = time.perf_counter() - t0
    conn.close()
    return elapsed


def run_raw(rows: list[Row], db: Path, cache_kib: int | None = None) -> float:
    """The same event rows into the same table, one executemany in one transaction (``cache_kib``: the
    page cache, else SQLite's default)."""
    t0 = time.perf_counter()
    conn = raw_transaction(db, EVENTS_TABLE)
    if cache_kib is not None:
        conn.execute(f"PRAGMA cache_size=-{cache_kib}")
    conn.executemany(INSERT_EVENTS, rows)
    return commit_and_close(conn, t0)


class _Line(msgspec.Struct):
    op: str
    key: str
    value: str | None = None  # (a revoke has none)
    source: str | None = None


KEYS_TABLE = "CREATE TABLE keys (cell TEXT, life INTEGER, key BLOB)"


def run_floor(lines: list[bytes], db: Path, *, bounded: bool = False) -> float:
    """The ``floor`` path: decode, build, seal, encode and insert, nothing else (no deciding, no cell
    state, no receipts, no checks; every line one event).

    ``bounded``: as the write path must at scale, a cell's cipher is held only while at most
    ``STREAM_CACHED_CELLS`` cells are (past them all are let go, and a cell touched again builds its
    cipher from its raw key), the page cache is a streamed batch's, and each new cell's key is stored
    (a row appended to a plain table, in the transaction). Its cell ids, revisions and raw keys stay in a
    dict for the whole run, which a write path bounded in memory cannot do: still a floor. Without it
    every cipher is held and no key is stored."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    from pmem.adapters.eventstore.codec import CLASS_VERSION, encode_state, timestamp_envelope
    from pmem.adapters.eventstore.eventlog import STREAM_CACHED_CELLS
    from pmem.adapters.eventstore.gc_pause import no_gc
    from pmem.adapters.eventstore.sealing import new_key, nonces, seal
    from pmem.adapters.eventstore.sqlite_log import STREAM_CACHE_KIB
    from pmem.domain.keys import cell_id

    t0 = time.perf_counter()
    decoder = msgspec.json.Decoder(_Line)
    stamp = timestamp_envelope(datetime.now(UTC))
    cells: dict[str, list[Any]] = {}  # key -> [cell id hex, revision, raw key]
    ciphers: dict[str, Any] = {}  # key -> the cell's key as sealing takes it (life, cipher)
    key_rows: list[tuple[str, int, bytes]] = []
    limit = STREAM_CACHED_CELLS if bounded else len(lines) + 1
    pool = nonces(len(lines))

    def rows() -> Iterator[Row]:
        for i, line in enumerate(lines):
            op = decoder.decode(line)
            cell, key = cells.get(op.key), ciphers.get(op.key)
            if cell is None:
                key, raw = new_key(1)
                cell = cells[op.key] = [cell_id.__wrapped__("default", op.key).hex, 0, raw]
                if bounded:
                    key_rows.append((cell[0], 1, raw))
            elif key is None:
                key = (1, AESGCM(cell[2]))
            if len(ciphers) >= limit:
                ciphers.clear()
            ciphers[op.key] = key
            cell[1] += 1
            fields = {"namespace": "default", "key": op.key, "requested": op.op, "reason": None, "text": None,
                      "source": op.source, "trust": 50, "observed_at": None, "op_id": None, "node_type": None,
                      "value": op.value, "vid": cell[1] - 1, "supersedes": None, "timestamp": stamp}
            seal(fields, cell[0], cell[1], key, pool[12 * i:12 * i + 12])
            yield cell[0], cell[1], "pmem.cell/Accepted", encode_state(fields, CLASS_VERSION)

    conn = raw_transaction(db, EVENTS_TABLE)
    if bounded:
        conn.execute(f"PRAGMA cache_size=-{STREAM_CACHE_KIB}")  # as a streamed batch's connection
        conn.execute(KEYS_TABLE)
    with no_gc():  # as P-Mem's write path: the collector would walk the whole heap, finding nothing
        conn.executemany(INSERT_EVENTS, rows())
        if bounded:
            conn.executemany("INSERT INTO keys VALUES (?, ?, ?)", key_rows)
    return commit_and_close(conn, t0)


def _raw_insert(db: Path, rows: Iterable[tuple[str, bytes]]) -> float:
    """Seconds to insert ``rows`` (key, body) into a plain table with no index."""
    t0 = time.perf_counter()
    conn = raw_transaction(db, PLAIN_TABLE)
    conn.executemany("INSERT INTO ops (key, body) VALUES (?, ?)", rows)
    return commit_and_close(conn, t0)


def run_raw_plain(lines: list[bytes], keys: list[str], db: Path) -> float:
    """The input JSON lines into a plain table with no index: the cheapest possible store."""
    return _raw_insert(db, zip(keys, lines, strict=True))


def run_raw_json(lines: list[bytes], keys: list[str], db: Path) -> float:
    """The input lines into a (key, body) table, a ``json.loads`` of each as it is bound."""
    return _raw_insert(db, ((json.loads(line)["key"], line) for line in lines))


def run_read_floor(db: Path) -> float:
    """The least a full rebuild of ``db`` reads, in one process: every event, a range of cells at a time
    in cell order as the rebuild reads them (its ranges, its statement), each decoded with ``orjson`` and
    opened with its cell's key (a cipher per cell, built from the range's keys read at once); nothing
    folded, nothing written."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    from pmem.adapters.eventstore.sealing import SEALED, open_with
    from pmem.adapters.eventstore.stored_log import range_keys, read_only
    from pmem.adapters.readmodels.parallel_rebuild import cell_ranges, in_cell_order, read_range
    from pmem.adapters.readmodels.sqlite_projection import REBUILD_CHUNK

    t0 = time.perf_counter()
    src = read_only(str(db.resolve()))
    stop = src.execute(f"SELECT max(rowid) FROM {SQLITE_EVENTS}").fetchone()[0] or 0
    ranges = cell_ranges(max(1, -(-stop // REBUILD_CHUNK)))
    ordered = in_cell_order(len(ranges))  # else rows come in storage order, cells interleaved
    for cells in ranges:
        keys, ciphers = range_keys(src, cells), {}
        for _, cell, revision, _, state in read_range(src, cells, stop, len(ranges)):
            fields = orjson.loads(state)
            key = ciphers.get(cell)
            if key is None and (raw := keys.get(cell)) is not None:
                if ordered:
                    ciphers.clear()  # (the cell before is done: hold one cipher, as the rebuild does)
                key = ciphers[cell] = (raw[0], AESGCM(raw[1]))
            if SEALED in fields and not open_with(key, fields, cell, revision):
                raise SystemExit(f"the read floor could not open cell {cell} at revision {revision}")
    src.close()
    return time.perf_counter() - t0
