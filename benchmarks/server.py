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

The latency percentiles are drawn as ``server_latency.png`` in ``--plots DIR``.

    .venv/bin/python -m benchmarks.server [--quick] [--cells 100000] [--clients 8] [--requests 2000]
        [--cli-samples 20] [--embedder hashing|onnx] [--workers 2] [--vector-index flat|hnsw] [--compare-router]
        [--store DIR] [--plots DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pmem
from benchmarks.harness import Run, add_output_options, bar_panel, percentile, save_figure
from benchmarks.serving import PMEM_BIN, concurrent, free_port, server_processes, start_server, stop
from pmem.adapters.service.credentials import Credentials

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


def _quoted(path: str) -> str:
    return urllib.parse.quote(path, safe="/?=&")


def ms(samples: list[float], q: float) -> float:
    return percentile(samples, q) * 1000


def _row(name: str, lat: list[float], cpu: float | None, cli: list[float] | None = None) -> dict[str, Any]:
    row = {"http_p50_ms": ms(lat, 50), "http_p99_ms": ms(lat, 99), "server_cpu_ms_per_request": cpu}
    if cli is not None:
        row |= {"cli_p50_ms": ms(cli, 50), "cli_p99_ms": ms(cli, 99), "ratio_p50": ms(cli, 50) / ms(lat, 50)}
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
    res["ops"] = {**_row("ops", ops_lat, ops_cpu, cli_ops), "http_ops_per_s": http_ops, "cli_ops_per_s": cli_ops_s,
                  "ratio": http_ops / cli_ops_s}
    mcp = mcp_stdio_roundtrip(db, token, cells, a.cli_samples * 25)
    res["mcp_get_stdio_p50_ms"] = None if mcp is None else ms(mcp, 50)
    res["mcp_get_stdio_ratio_p50"] = None if mcp is None else ms(cli_get, 50) / ms(mcp, 50)  # CLI / MCP
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
        servers[name] = (port, start_server(db, port, a.embedder, 1, command=command))
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
            stop(proc)
    return {name: _row(f"get, one process, {name}", lat, statistics.median(cpus) if cpus else None)
            for name, (lat, cpus) in seen.items()}


QUICK = {"cells": 20_000, "requests": 800, "cli_samples": 5}
KINDS = {"healthz_floor": "GET /healthz (floor)", "get": "get", "search": "search", "ops": "ops (one accept)"}


def report(run: Run, res: dict[str, Any]) -> None:
    run.table([{"request": label, "HTTP p50 ms": res[k]["http_p50_ms"], "HTTP p99 ms": res[k]["http_p99_ms"],
                "server CPU ms/request": res[k]["server_cpu_ms_per_request"], "CLI p50 ms": res[k].get("cli_p50_ms"),
                "CLI p99 ms": res[k].get("cli_p99_ms")} for k, label in KINDS.items()],
              f"pmem serve, {res['cells']:,} cells, {res['clients']} clients, {res['workers']} workers "
              f"(CLI: a fresh process per request)")
    for kind in ("get", "search"):
        run.beside(f"HTTP {kind} p50", res[kind]["http_p50_ms"], f"CLI {kind} p50", res[kind]["cli_p50_ms"], "ms")
    run.beside("HTTP ops/s", res["ops"]["http_ops_per_s"], "CLI ops/s", res["ops"]["cli_ops_per_s"], "ops/s")
    if res["mcp_get_stdio_p50_ms"] is not None:
        run.beside("MCP get over stdio p50", res["mcp_get_stdio_p50_ms"], "CLI get p50", res["get"]["cli_p50_ms"],
                   "ms")
    run.figures |= res


def plot_latency(res: dict[str, Any], path: Path) -> None:
    nan = float("nan")  # no bar: the floor has no CLI counterpart
    series = {f"{where} {q}": [res[k].get(f"{where.lower()}_{q}_ms", nan) for k in KINDS]
              for where in ("HTTP", "CLI") for q in ("p50", "p99")}

    def draw(axes: list[Any]) -> None:
        bar_panel(axes[0], list(KINDS.values()), {k.replace("CLI", "CLI (baseline)"): v for k, v in series.items()},
                  "latency per request (ms, log scale)",
                  f"pmem serve against the CLI: {res['cells']:,} cells, {res['clients']} clients", logy=True,
                  legend="upper left")

    print(f"plot: {save_figure(draw, path)}", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
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
    p.add_argument("--compare-router", dest="compare_router", action="store_true",
                   help="also: get through one-process servers with and without the short way for hot reads")
    p.add_argument("--store", help="keep the store here and reuse it on later runs with the same --cells "
                                   "(default: a temporary one)")
    add_output_options(p, "server")
    a = p.parse_args(argv)
    if a.quick:
        vars(a).update(QUICK)
    run = Run("server", a.results)
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
            stop(server)
        if a.compare_router:
            res["get_one_process"] = compare_router(db, token, a)
    report(run, res)
    plot_latency(res, a.plots / "server_latency.png")
    run.finish()


if __name__ == "__main__":
    main()
