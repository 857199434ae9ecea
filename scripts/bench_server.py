#!/usr/bin/env python3
"""Benchmark the HTTP API (``pmem serve``) against the same queries through the CLI, in one run.

Setup (untimed): a store of ``--cells`` cells (``item N`` = ``value N``), written with ``store.apply`` in
batches and caught up (frontier and vectors), and one credential. Then ``pmem serve`` starts on a free
loopback port and is warmed (a few requests of each kind).

Measured, with ``--clients`` concurrent clients (processes, one keep-alive ``http.client`` connection
each):

* ``get``: ``GET /v1/cells/{key}`` of random cells, p50 and p99 of each request's latency;
* ``search``: ``GET /v1/search?q=item N&k=12``, p50 and p99;
* ``ops``: ``POST /v1/ops`` of one ``accept`` each, operations per second over the whole run;
* the floor, measured first: ``GET /healthz`` (no token, no store) through the same clients, which is what
  the clients, the loopback and uvicorn cost by themselves on this machine;

and, for each, the server processes' CPU milliseconds per request (from /proc: what the server spends,
whatever the clients and the machine's other jobs do to the latencies). The baseline, the same query
through the CLI (``pmem --db STORE get KEY``, ``pmem search``, ``pmem accept``), a fresh process each,
``--cli-samples`` times one after another: p50, p99 and ops/s,
with the ratio (CLI p50 / HTTP p50, HTTP ops/s / CLI ops/s).

``--compare-router``: also ``get`` through two one-process servers on the same store, in alternating
rounds: ``pmem serve`` and the same app without the short way for hot reads (FastAPI's router answers
every route), p50, p99 and the median of the rounds' server CPU per request.

``mcp_stdio_roundtrip``: the MCP ``get`` round trip over stdio (one ``pmem mcp`` process, the SDK's
client session), p50, and its ratio to the CLI ``get`` p50 above.

The embedder is ``hashing`` by default: FAISS latency does not depend on the embedder, and 100,000
cells through the ONNX model take minutes to embed; ``--embedder onnx`` measures with the model (a
query embedding then adds its own few milliseconds to each search).

Run it with the project's virtualenv:

    .venv/bin/python scripts/bench_server.py [--quick] [--cells 100000] [--clients 8] [--requests 2000]
        [--cli-samples 20] [--embedder hashing|onnx] [--workers 2] [--vector-index flat|hnsw] [--compare-router]
        [--store DIR] [--json out.json]
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

import pmem
from pmem.adapters.service.credentials import Credentials

PMEM_BIN = str(Path(sys.executable).parent / "pmem")
BATCH = 5_000


def build_store(db: str, cells: int, embedder: str) -> str:
    """Write ``cells`` cells, catch every projection up, and add one credential; its token."""
    with pmem.open(db, embedder=embedder) as store:
        for start in range(0, cells, BATCH):
            store.apply([{"op": "accept", "key": f"item {i}", "value": f"value {i}", "namespace": "bench"}
                         for i in range(start, min(cells, start + BATCH))])
        store.catch_up()
        store.search("warm up", 1, namespace="bench")  # the vector index file is written once, here
        return Credentials(store.projection_db).add(["bench"], "bench", 80)[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(db: str, port: int, embedder: str, workers: int,
                 command: list[str] | None = None) -> subprocess.Popen[bytes]:
    """``pmem serve`` (or ``command``) on ``port``, once its ``/healthz`` answers."""
    command = command or [PMEM_BIN, "--db", db, "--embedder", embedder, "serve", "--port", str(port),
                          "--workers", str(workers)]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"pmem serve exited: {proc.stderr.read().decode() if proc.stderr else ''}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit("pmem serve did not start")
        time.sleep(0.1)


Request = Callable[[random.Random, int], tuple[str, str, bytes | None]]  # (method, path, body)


def _client(port: int, token: str, request: Request, seed: int, count: int, start: Any, out: Any) -> None:
    """One client process: ``count`` requests on one keep-alive connection, each timed from sending to
    the last byte read; the seconds go back through ``out`` (a pipe)."""
    try:
        _requests(port, token, request, seed, count, start, out)
    except Exception as e:  # the parent reads one message per client: the error instead of the latencies
        out.send(f"client {seed}: {type(e).__name__}: {e}")


def _requests(port: int, token: str, request: Request, seed: int, count: int, start: Any, out: Any) -> None:
    rng = random.Random(seed)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    mine = []
    start.wait()
    for n in range(count):
        method, path, body = request(rng, seed * count + n)
        t = time.perf_counter()
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        data = response.read()
        mine.append(time.perf_counter() - t)
        if response.status != 200:
            out.send(f"{method} {path}: {response.status} {data[:300]!r}")
            return
    conn.close()
    out.send(mine)


def concurrent(port: int, token: str, clients: int, total: int, request: Request,
               server_pids: list[int] | None = None) -> tuple[list[float], float, float | None]:
    """``total`` requests shared by ``clients`` client processes (forked, one keep-alive ``http.client``
    connection each): each request's seconds, the wall time, and the server's CPU milliseconds per request
    (None when ``server_pids`` is not given or /proc is not there).

    Processes, not threads: client threads in one Python process wait for each other's GIL, which a
    latency would then include; and ``http.client`` costs the client about a quarter of httpx's CPU per
    request, which matters when the clients share the server's cores."""
    ctx = multiprocessing.get_context("fork")
    start = ctx.Event()
    pipes, procs = [], []
    for i in range(clients):
        receive, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_client, args=(port, token, request, i, total // clients, start, send))
        proc.start()
        pipes.append(receive)
        procs.append(proc)
    time.sleep(0.2)  # every client connected and waiting
    cpu_before = cpu_seconds(server_pids)
    t = time.perf_counter()
    start.set()
    results = [r.recv() for r in pipes]
    wall = time.perf_counter() - t
    cpu_after = cpu_seconds(server_pids)
    for proc in procs:
        proc.join()
    latencies: list[float] = []
    for r in results:
        if isinstance(r, str):
            raise SystemExit(r)
        latencies.extend(r)
    cpu = None if cpu_before is None or cpu_after is None else (cpu_after - cpu_before) / len(latencies) * 1000
    return latencies, wall, cpu


def cpu_seconds(pids: list[int] | None) -> float | None:
    """User + system CPU seconds of these processes so far (Linux /proc), or None."""
    if not pids:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    try:
        for pid in pids:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    except (FileNotFoundError, IndexError, ValueError):
        return None
    return total / ticks


def server_processes(server: subprocess.Popen[bytes]) -> list[int]:
    """The server's process and its worker processes (``--workers N``: uvicorn's children)."""
    children = Path(f"/proc/{server.pid}/task/{server.pid}/children")
    try:
        return [server.pid, *(int(p) for p in children.read_text().split())]
    except (FileNotFoundError, ValueError):
        return [server.pid]


def cli_latencies(db: str, embedder: str, samples: int, args: Callable[[random.Random, int], list[str]]) -> list[float]:
    rng = random.Random(99)
    out = []
    for n in range(samples):
        t = time.perf_counter()
        subprocess.run([PMEM_BIN, "--db", db, "--namespace", "bench", "--embedder", embedder, *args(rng, n)],
                       check=True, capture_output=True)
        out.append(time.perf_counter() - t)
    return out


def mcp_stdio_roundtrip(db: str, token: str, cells: int, samples: int) -> list[float] | None:
    """Seconds of each MCP ``get`` round trip over stdio: one ``pmem mcp`` process (the token in
    ``PMEM_TOKEN``) driven by the MCP SDK's client session; after 20 warm-up calls, ``samples`` ``get`` tool
    calls of random cells, each from the request to the decoded result (pipes, tool, store read, text)."""
    import anyio
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    rng, warmup = random.Random(7), 20
    out: list[float] = []

    async def run() -> None:
        params = StdioServerParameters(command=PMEM_BIN, args=["--db", db, "--namespace", "bench", "mcp"],
                                       env={"PMEM_TOKEN": token})
        async with stdio_client(params) as (r, w), ClientSession(r, w) as session:
            await session.initialize()
            for n in range(warmup + samples):
                i = rng.randrange(cells)
                t = time.perf_counter()
                result = await session.call_tool("get", {"key": f"item {i}"})
                elapsed = time.perf_counter() - t
                if result.is_error or result.content[0].text != f"item_{i} = value {i}":
                    raise SystemExit(f"pmem mcp get item {i}: {result.content}")
                if n >= warmup:
                    out.append(elapsed)

    anyio.run(run)
    return out


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))] * 1000


def _quoted(path: str) -> str:
    return urllib.parse.quote(path, safe="/?=&")


def _row(name: str, lat: list[float], cpu: float | None, cli: list[float] | None = None) -> dict[str, Any]:
    row = {"http_p50_ms": pct(lat, 0.5), "http_p99_ms": pct(lat, 0.99), "server_cpu_ms_per_request": cpu}
    if cli is not None:
        row |= {"cli_p50_ms": pct(cli, 0.5), "cli_p99_ms": pct(cli, 0.99), "ratio_p50": pct(cli, 0.5) / pct(lat, 0.5)}
    print(f"{name}: {json.dumps(row)}", file=sys.stderr, flush=True)
    return row


def measure(db: str, token: str, port: int, pids: list[int], a: argparse.Namespace) -> dict[str, Any]:
    """Every figure, the HTTP ones first (the CLI's processes would otherwise share the cores with them)."""
    cells, n = a.cells, a.requests
    res: dict[str, Any] = {}
    floor, _, floor_cpu = concurrent(port, token, a.clients, n, lambda r, i: ("GET", "/healthz", None), pids)
    get_lat, _, get_cpu = concurrent(port, token, a.clients, n, lambda r, i: (
        "GET", _quoted(f"/v1/cells/item {r.randrange(cells)}"), None), pids)
    search_lat, _, search_cpu = concurrent(port, token, a.clients, n, lambda r, i: (
        "GET", "/v1/search?q=" + urllib.parse.quote(f"item {r.randrange(cells)}"), None), pids)
    ops_lat, ops_wall, ops_cpu = concurrent(port, token, a.clients, n, lambda r, i: (
        "POST", "/v1/ops", json.dumps([{"op": "accept", "key": f"new {i}", "value": f"v {i}"}]).encode()), pids)
    res["healthz_floor"] = _row("healthz", floor, floor_cpu)
    cli_get = cli_latencies(db, a.embedder, a.cli_samples, lambda r, i: ["get", f"item {r.randrange(cells)}"])
    cli_search = cli_latencies(db, a.embedder, a.cli_samples,
                               lambda r, i: ["search", f"item {r.randrange(cells)}"])
    cli_ops = cli_latencies(db, a.embedder, a.cli_samples, lambda r, i: ["accept", f"cli {i}", f"v {i}"])
    res["get"] = _row("get", get_lat, get_cpu, cli_get)
    res["search"] = _row("search", search_lat, search_cpu, cli_search)
    http_ops = len(ops_lat) / ops_wall
    cli_ops_s = len(cli_ops) / sum(cli_ops)
    res["ops"] = {"http_ops_per_s": http_ops, "http_p50_ms": pct(ops_lat, 0.5), "server_cpu_ms_per_request": ops_cpu,
                  "cli_ops_per_s": cli_ops_s, "ratio": http_ops / cli_ops_s}
    mcp = mcp_stdio_roundtrip(db, token, cells, a.cli_samples * 25)
    res["mcp_get_stdio_p50_ms"] = None if mcp is None else pct(mcp, 0.5)
    res["mcp_get_stdio_ratio_p50"] = None if mcp is None else pct(cli_get, 0.5) / pct(mcp, 0.5)  # CLI / MCP
    return res


def store_for(a: argparse.Namespace, folder: Path) -> tuple[str, str]:
    """The store of ``a.cells`` cells in ``folder`` (built there unless it already is) and its token."""
    folder.mkdir(parents=True, exist_ok=True)
    db, saved = folder / f"bench-{a.cells}-{a.embedder}.db", folder / f"bench-{a.cells}-{a.embedder}.token"
    os.environ["PMEM_CACHE_DIR"] = str(folder / "cache")
    if db.exists() and saved.exists():
        return str(db), saved.read_text()
    t = time.perf_counter()
    token = build_store(str(db), a.cells, a.embedder)
    saved.write_text(token)
    print(f"store of {a.cells} cells built in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    return str(db), token


# The app without the short way for hot reads (FastAPI's router answers every route), served as
# ``pmem serve --workers 1`` serves its app: what --compare-router measures the short way against.
ROUTER_ONLY = """
import sys, uvicorn
from pmem.adapters.servers.http_api import create_app
from pmem.adapters.servers.http_protocol import NoDelayProtocol
db, port, embedder = sys.argv[1], int(sys.argv[2]), sys.argv[3]
app = create_app(db, settings={"embedder": embedder}, fast_reads=False)
uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False, http=NoDelayProtocol)
"""


def compare_router(db: str, token: str, a: argparse.Namespace, rounds: int = 6) -> dict[str, Any]:
    """``get`` through two one-process servers on the same store, in alternating rounds (the first a
    warm-up): ``pmem serve`` (the short way) and the same app with FastAPI's router answering it."""
    servers = {}
    for name in ("short_way", "router_only"):
        port = free_port()
        command = None if name == "short_way" else [sys.executable, "-c", ROUTER_ONLY, db, str(port), a.embedder]
        servers[name] = (port, start_server(db, port, a.embedder, 1, command))
    seen: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in servers}
    try:
        for n in range(rounds):
            for name, (port, proc) in servers.items():
                lat, _, cpu = concurrent(port, token, a.clients, a.requests // (rounds - 1), lambda r, i: (
                    "GET", _quoted(f"/v1/cells/item {r.randrange(a.cells)}"), None), [proc.pid])
                if n and cpu is not None:
                    seen[name][0].extend(lat)
                    seen[name][1].append(cpu)
    finally:
        for _, proc in servers.values():
            proc.terminate()
            proc.wait(timeout=60)
    return {name: _row(f"get, one process, {name}", lat, statistics.median(cpus) if cpus else None)
            for name, (lat, cpus) in seen.items()}


QUICK = {"cells": 20_000, "requests": 800, "cli_samples": 5}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cells", type=int, default=100_000)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--requests", type=int, default=2_000, help="requests per HTTP measurement (all clients)")
    p.add_argument("--cli-samples", dest="cli_samples", type=int, default=20)
    p.add_argument("--embedder", default="hashing")
    p.add_argument("--workers", type=int, default=2, help="pmem serve --workers (default 2: one per core here)")
    p.add_argument("--vector-index", dest="vector_index", choices=("flat", "hnsw"), default="flat",
                   help="the vector index the server and the CLI use (PMEM_VECTOR_INDEX; default flat)")
    p.add_argument("--quick", action="store_true",
                   help=f"a smaller run (under 2 minutes): {', '.join(f'--{k} {v}' for k, v in QUICK.items())}")
    p.add_argument("--json", help="also write the figures here")
    p.add_argument("--compare-router", dest="compare_router", action="store_true",
                   help="also: get through one-process servers with and without the short way for hot reads")
    p.add_argument("--store", help="keep the store here and reuse it on later runs with the same --cells "
                                   "(default: a temporary one)")
    a = p.parse_args()
    if a.quick:
        vars(a).update(QUICK)
    os.environ["PMEM_VECTOR_INDEX"] = a.vector_index  # for the server and the CLI processes alike
    with tempfile.TemporaryDirectory() as d:
        db, token = store_for(a, Path(a.store or d))
        with pmem.open(db, embedder=a.embedder) as store:  # the index's cache file, built once (untimed)
            store.search("warm up", 1, namespace="bench")
        port = free_port()
        server = start_server(db, port, a.embedder, a.workers)
        try:
            pids = server_processes(server)
            concurrent(port, token, a.clients, a.clients * 20, lambda r, i: ("GET", "/v1/search?q=x", None))
            concurrent(port, token, a.clients, a.clients * 20, lambda r, i: ("GET", "/v1/cells/item%200", None))
            res = {"cells": a.cells, "clients": a.clients, "requests": a.requests, "embedder": a.embedder,
                   "workers": a.workers, "vector_index": a.vector_index, **measure(db, token, port, pids, a)}
        finally:
            server.terminate()
            server.wait(timeout=60)
        if a.compare_router:
            res["get_one_process"] = compare_router(db, token, a)
    print(json.dumps(res, indent=2))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
