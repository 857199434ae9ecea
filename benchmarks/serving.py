"""A real ``pmem serve`` for the benchmarks, and concurrent client processes that time its requests."""

from __future__ import annotations

import http.client
import multiprocessing
import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

PMEM_BIN = str(Path(sys.executable).parent / "pmem")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(db: str, port: int, embedder: str, workers: int, *extra: str,
                 command: list[str] | None = None) -> subprocess.Popen[bytes]:
    """``pmem serve`` (with ``extra`` options, or ``command`` instead) on ``port``, once its ``/healthz`` answers."""
    command = command or [PMEM_BIN, "--db", db, "--embedder", embedder, "serve", "--port", str(port),
                          "--workers", str(workers), *extra]
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


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    proc.wait(timeout=60)


@contextmanager
def serving(db: str, *extra: str, embedder: str = "hashing") -> Iterator[str]:
    """One ``pmem serve`` process over ``db`` on a free port: its base URL while the block runs."""
    port = free_port()
    proc = start_server(db, port, embedder, 1, *extra)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)


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
    """The server's process and every process below it: ``--workers N``'s (uvicorn's children), each
    one's heavy process, and their score workers' processes."""
    found, todo = [], [server.pid]
    while todo:
        pid = todo.pop()
        found.append(pid)
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                todo.extend(int(p) for p in (task / "children").read_text().split())
            except (FileNotFoundError, ValueError):
                pass
    return found


