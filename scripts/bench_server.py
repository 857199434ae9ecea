#!/usr/bin/env python3
"""Benchmark the HTTP API (``pmem serve``) against the same queries through the CLI, in one run.

Setup (untimed): a store of ``--cells`` cells (``item N`` = ``value N``), written with ``store.apply`` in
batches and caught up (frontier and vectors), and one credential. Then ``pmem serve`` starts on a free
loopback port and is warmed (a few requests of each kind).

Measured, with ``--clients`` concurrent clients (threads, one keep-alive ``httpx.Client`` each):

* ``get``: ``GET /v1/cells/{key}`` of random cells, p50 and p99 of each request's latency;
* ``search``: ``GET /v1/search?q=item N&k=12``, p50 and p99;
* ``ops``: ``POST /v1/ops`` of one ``accept`` each, operations per second over the whole run;

and the baseline, the same query through the CLI (``pmem --db STORE get KEY``, ``pmem search``,
``pmem accept``), a fresh process each, ``--cli-samples`` times one after another: p50, p99 and ops/s,
with the ratio (CLI p50 / HTTP p50, HTTP ops/s / CLI ops/s).

``mcp_stdio_roundtrip``: the MCP ``get`` round trip over stdio (one ``pmem mcp`` process, the SDK's
client session), p50, and its ratio to the CLI ``get`` p50 above.

The embedder is ``hashing`` by default: FAISS latency does not depend on the embedder, and 100,000
cells through the ONNX model take minutes to embed; ``--embedder onnx`` measures with the model (a
query embedding then adds its own few milliseconds to each search).

Run it with the project's virtualenv:

    .venv/bin/python scripts/bench_server.py [--cells 100000] [--clients 8] [--requests 2000]
        [--cli-samples 20] [--embedder hashing|onnx] [--workers 1] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
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


def start_server(db: str, port: int, embedder: str, workers: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([PMEM_BIN, "--db", db, "--embedder", embedder, "serve", "--port", str(port),
                             "--workers", str(workers)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
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


def concurrent(url: str, token: str, clients: int, total: int,
               request: Callable[[httpx.Client, random.Random, int], httpx.Response]) -> tuple[list[float], float]:
    """``total`` requests shared by ``clients`` threads: each request's seconds, and the wall time."""
    latencies: list[float] = []
    lock = threading.Lock()
    per = total // clients

    def run(i: int) -> None:
        rng = random.Random(i)
        mine = []
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120) as c:
            for n in range(per):
                t = time.perf_counter()
                r = request(c, rng, i * per + n)
                mine.append(time.perf_counter() - t)
                if r.status_code != 200:
                    raise SystemExit(f"{r.request.url}: {r.status_code} {r.text}")
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, time.perf_counter() - start


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


def measure(db: str, token: str, url: str, a: argparse.Namespace) -> dict[str, Any]:
    cells = a.cells
    res: dict[str, Any] = {}
    get_lat, _ = concurrent(url, token, a.clients, a.requests,
                            lambda c, r, n: c.get(f"/v1/cells/item {r.randrange(cells)}"))
    search_lat, _ = concurrent(url, token, a.clients, a.requests,
                               lambda c, r, n: c.get("/v1/search", params={"q": f"item {r.randrange(cells)}"}))
    ops_lat, ops_wall = concurrent(url, token, a.clients, a.requests, lambda c, r, n: c.post(
        "/v1/ops", json=[{"op": "accept", "key": f"new {n}", "value": f"v {n}"}]))
    cli_get = cli_latencies(db, a.embedder, a.cli_samples, lambda r, n: ["get", f"item {r.randrange(cells)}"])
    cli_search = cli_latencies(db, a.embedder, a.cli_samples,
                               lambda r, n: ["search", f"item {r.randrange(cells)}"])
    cli_ops = cli_latencies(db, a.embedder, a.cli_samples, lambda r, n: ["accept", f"cli {n}", f"v {n}"])
    for name, http, cli in (("get", get_lat, cli_get), ("search", search_lat, cli_search)):
        res[name] = {"http_p50_ms": pct(http, 0.5), "http_p99_ms": pct(http, 0.99), "cli_p50_ms": pct(cli, 0.5),
                     "cli_p99_ms": pct(cli, 0.99), "ratio_p50": pct(cli, 0.5) / pct(http, 0.5)}
    http_ops = len(ops_lat) / ops_wall
    cli_ops_s = len(cli_ops) / sum(cli_ops)
    res["ops"] = {"http_ops_per_s": http_ops, "http_p50_ms": pct(ops_lat, 0.5), "cli_ops_per_s": cli_ops_s,
                  "ratio": http_ops / cli_ops_s}
    mcp = mcp_stdio_roundtrip(db, token, cells, a.cli_samples * 25)
    res["mcp_get_stdio_p50_ms"] = None if mcp is None else pct(mcp, 0.5)
    res["mcp_get_stdio_ratio_p50"] = None if mcp is None else pct(cli_get, 0.5) / pct(mcp, 0.5)  # CLI / MCP
    return res


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cells", type=int, default=100_000)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--requests", type=int, default=2_000, help="requests per HTTP measurement (all clients)")
    p.add_argument("--cli-samples", dest="cli_samples", type=int, default=20)
    p.add_argument("--embedder", default="hashing")
    p.add_argument("--workers", type=int, default=1, help="pmem serve --workers")
    p.add_argument("--json", help="also write the figures here")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        db = str(Path(d) / "bench.db")
        os.environ["PMEM_CACHE_DIR"] = str(Path(d) / "cache")
        t = time.perf_counter()
        token = build_store(db, a.cells, a.embedder)
        print(f"store of {a.cells} cells built in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        port = free_port()
        server = start_server(db, port, a.embedder, a.workers)
        url = f"http://127.0.0.1:{port}"
        try:
            concurrent(url, token, a.clients, a.clients * 10, lambda c, r, n: c.get("/v1/search", params={"q": "x"}))
            res = {"cells": a.cells, "clients": a.clients, "requests": a.requests, "embedder": a.embedder,
                   "workers": a.workers,
                   **measure(db, token, url, a)}
        finally:
            server.terminate()
            server.wait(timeout=60)
    print(json.dumps(res, indent=2))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
