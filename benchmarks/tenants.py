"""Many tenants on one ``pmem serve`` process: each tenant's ``get`` and ``search`` p99 without and with a
heavy tenant, in one run.

Setup (untimed): ``--namespaces`` namespaces of ``--min-cells`` to ``--max-cells`` cells each (spread
evenly), one credential per namespace, every projection caught up and (unless ``--no-next``) every
namespace's ``next`` scores current; one ``pmem serve`` process (one
worker: the point is that one process is not stalled) with its default limits (``--connections``: that
one set).

Measured, for ``--seconds`` each, twice: ``--clients`` client processes (one keep-alive ``http.client``
connection each) send a mix for random tenants, each with its own token: ``get`` 50%, ``search`` 25%,
``read`` 10%, ``ops`` (one ``accept``) 10%, ``next`` 5% (``--no-next``: left out), and ``GET /healthz``
5%, the floor (no store touched: what the loaded machine allows any request). First alone (the
baseline), then beside one more process, the heavy tenant, sending the heaviest request the limits
allow in a loop, in turn: a batch of ``--max-batch`` operations, a read with a question of
``--max-question`` characters and ``k`` = ``--max-k``, a search with that ``k``, and (unless ``--no-next``)
``next`` with that ``k`` (``--only KIND,...`` keeps only those kinds, in both). Reported: every tenant's
``get`` p99 and ``search`` p99 in both phases, and over all tenants ``get``/``search``/floor p50 and p99
with the heavy tenant beside those without it (the goal: get p99 at most 2x the baseline, and at most
10 ms).

    .venv/bin/python -m benchmarks.tenants [--quick] [--namespaces 50] [--min-cells 2000] [--max-cells 20000]
        [--clients 8] [--seconds 30] [--no-next] [--only get,ops,floor] [--connections N] [--store DIR]
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import random
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pmem
from benchmarks.harness import Run, add_output_options, percentile
from benchmarks.serving import free_port, start_server, stop
from pmem.adapters.servers.limits import Limits
from pmem.adapters.service.credentials import Credentials

QUICK = {"namespaces": 10, "min_cells": 200, "max_cells": 2000, "seconds": 8}
BATCH = 5000
# "floor": ``GET /healthz``, no store touched: what the machine allows a request under the same load
MIX = (("get", 50), ("search", 25), ("read", 10), ("ops", 10), ("next", 5), ("floor", 5))
HEAVY_KINDS = ("ops", "read", "search", "next")  # what the heavy tenant sends, in turn
Tenant = tuple[str, str, int]  # namespace, token, cells


def build(db: str, a: argparse.Namespace) -> list[Tenant]:
    """The namespaces, their cells and credentials, every projection caught up."""
    tenants: list[Tenant] = []
    with pmem.open(db, embedder="hashing") as store:
        creds = Credentials(store.projection_db)
        for t in range(a.namespaces):
            ns = f"tenant{t}"
            cells = a.min_cells + (a.max_cells - a.min_cells) * t // max(1, a.namespaces - 1)
            for start in range(0, cells, BATCH):
                store.apply([{"op": "accept", "key": f"person {i} city", "value": f"city {i % 97}",
                              "namespace": ns} for i in range(start, min(cells, start + BATCH))])
            tenants.append((ns, creds.add([ns], f"agent{t}", 80)[1], cells))
        store.catch_up()
        store.search("warm up", 1, namespace=tenants[0][0])
        if a.next:  # the stored scores current, as a server that has run a while has them (from scratch
            for ns, _, _ in tenants:  # they are benchmarks.graph_next's figure)
                store.what_next(k=1, namespace=ns, wait=None)
    return tenants


def request(kind: str, rng: random.Random, tenant: Tenant) -> tuple[str, str, bytes | None]:
    ns, _, cells = tenant
    key = f"person {rng.randrange(cells)} city"
    q = urllib.parse.quote
    if kind == "get":
        return "GET", f"/v1/cells/{q(key)}?namespace={ns}", None
    if kind == "floor":
        return "GET", "/healthz", None
    if kind == "search":
        return "GET", f"/v1/search?q={q(key)}&k=12&namespace={ns}", None
    if kind == "read":
        return "POST", f"/v1/read?namespace={ns}", json.dumps({"question": f"where is {key}?"}).encode()
    if kind == "ops":
        body = [{"op": "accept", "key": key, "value": f"city {rng.randrange(97)}"}]
        return "POST", f"/v1/ops?namespace={ns}", json.dumps(body).encode()
    return "GET", f"/v1/next?k=5&namespace={ns}", None


def heavy(kind: str, rng: random.Random, tenant: Tenant, limits: Limits) -> tuple[str, str, bytes | None]:
    """The heaviest request of ``kind`` the limits allow."""
    ns, _, cells = tenant
    if kind == "ops":
        body = [{"op": "accept", "key": f"person {rng.randrange(cells)} city", "value": f"heavy {i}"}
                for i in range(limits.batch)]
        return "POST", f"/v1/ops?namespace={ns}", json.dumps(body).encode()
    if kind == "read":
        question = ("where does person live " * limits.question_chars)[:limits.question_chars]
        body = {"question": question, "k": limits.k}
        return "POST", f"/v1/read?namespace={ns}", json.dumps(body).encode()
    if kind == "search":
        question = ("city person " * limits.question_chars)[:limits.question_chars]
        return "GET", f"/v1/search?q={urllib.parse.quote(question)}&k={limits.k}&namespace={ns}", None
    return "GET", f"/v1/next?k={limits.k}&namespace={ns}", None


def _send(conn: http.client.HTTPConnection, method: str, path: str, body: bytes | None,
          token: str) -> tuple[int, float]:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    t = time.perf_counter()
    conn.request(method, path, body=body, headers=headers)
    response = conn.getresponse()
    response.read()
    return response.status, time.perf_counter() - t


def client(port: int, tenants: list[Tenant], kinds: list[str], seed: int, seconds: float, start: Any,
           out: Any) -> None:
    """One client process: the mix for random tenants until ``seconds`` pass; (tenant, kind, status, s)."""
    rng = random.Random(seed)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    weights = [w for k, w in MIX if k in kinds]
    seen: list[tuple[int, str, int, float]] = []
    start.wait()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t = rng.randrange(len(tenants))
        kind = rng.choices(kinds, weights)[0]
        status, s = _send(conn, *request(kind, rng, tenants[t]), tenants[t][1])
        seen.append((t, kind, status, s))
    out.send(seen)


def heavy_client(port: int, tenant: Tenant, kinds: list[str], limits: Limits, seconds: float, start: Any,
                 out: Any) -> None:
    """The heavy tenant: the heaviest allowed requests, in turn, until ``seconds`` pass."""
    rng = random.Random(99)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    seen: list[tuple[int, str, int, float]] = []
    start.wait()
    end, n = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        kind = kinds[n % len(kinds)]
        n += 1
        status, s = _send(conn, *heavy(kind, rng, tenant, limits), tenant[1])
        seen.append((-1, kind, status, s))
    out.send(seen)


Seen = list[tuple[int, str, int, float]]  # (tenant, or -1 for the heavy one; kind; status; seconds)


def kinds_of(text: str) -> list[str]:
    """``--only``: kinds of request from :data:`MIX`, one of them a heavy tenant's."""
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in dict(MIX)]
    if unknown or not kinds:
        raise argparse.ArgumentTypeError(f"expected kinds of {', '.join(k for k, _ in MIX)}, got {text!r}")
    if not set(kinds) & set(HEAVY_KINDS):
        raise argparse.ArgumentTypeError(f"the heavy tenant needs one of {', '.join(HEAVY_KINDS)}, got {text!r}")
    return kinds


def phase(port: int, tenants: list[Tenant], a: argparse.Namespace, with_heavy: bool) -> Seen:
    ctx = multiprocessing.get_context("fork")
    start = ctx.Event()
    kinds = [k for k, _ in MIX if (k != "next" or a.next) and k in a.only]
    jobs = [(client, (port, tenants, kinds, i, a.seconds)) for i in range(a.clients)]
    if with_heavy:
        heavy_kinds = [k for k in HEAVY_KINDS if (k != "next" or a.next) and k in a.only]
        jobs.append((heavy_client, (port, tenants[-1], heavy_kinds, Limits(), a.seconds)))
    pipes, procs = [], []
    for target, args in jobs:
        receive, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=target, args=(*args, start, send))
        proc.start()
        pipes.append(receive)
        procs.append(proc)
    time.sleep(0.3)
    start.set()
    seen = [row for r in pipes for row in r.recv()]
    for proc in procs:
        proc.join()
    return seen


def ms(samples: list[float], q: float) -> float | None:
    return round(percentile(samples, q) * 1000, 2) if samples else None


def report(run: Run, tenants: list[Tenant], base: list[Any], loaded: list[Any]) -> None:
    def of(rows: list[Any], kind: str, t: int | None = None) -> list[float]:
        return [s for (who, k, status, s) in rows if k == kind and status == 200 and (t is None or who == t)]

    run.table([{"tenant": ns, "cells": cells,
                "get p99 ms": ms(of(base, "get", t), 99), "get p99 ms, heavy": ms(of(loaded, "get", t), 99),
                "search p99 ms": ms(of(base, "search", t), 99),
                "search p99 ms, heavy": ms(of(loaded, "search", t), 99)}
               for t, (ns, _, cells) in enumerate(tenants)], "each tenant, without and with the heavy tenant")
    rows = []
    for name, rs in (("without", base), ("with the heavy tenant", loaded)):
        statuses: dict[int, int] = {}
        for (who, _, status, _) in rs:
            if who >= 0:
                statuses[status] = statuses.get(status, 0) + 1
        rows.append({"phase": name, "requests": sum(statuses.values()),
                     "not 200": sum(n for s, n in statuses.items() if s != 200),
                     **{f"{k} {q}": ms(of(rs, k), int(q[1:]))
                        for k in ("get", "search", "floor") for q in ("p50", "p99")}})
    run.figures["not_200"] = {name: {f"{kind} {status}": sum(1 for r in rs if r[1] == kind and r[2] == status)
                                     for (_, kind, status, _) in rs if status != 200}
                              for name, rs in (("without", base), ("with the heavy tenant", loaded))}
    heavy_rows = [r for r in loaded if r[0] == -1]
    rows[1]["heavy requests"] = len(heavy_rows)
    rows[0]["heavy requests"] = 0
    run.table(rows, "all tenants (ms)")
    for kind in ("get", "search", "floor"):
        if not of(loaded, kind) or not of(base, kind):
            continue  # (left out by --only)
        run.beside(f"{kind} p99 with the heavy tenant", percentile(of(loaded, kind), 99) * 1000,
                   "without", percentile(of(base, kind), 99) * 1000, "ms")
    run.figures["heavy"] = {k: {"count": len(of(heavy_rows, k)), "p50 ms": ms(of(heavy_rows, k), 50)}
                            for k in ("ops", "read", "search", "next")}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--namespaces", type=int, default=50)
    p.add_argument("--min-cells", dest="min_cells", type=int, default=2000)
    p.add_argument("--max-cells", dest="max_cells", type=int, default=20000)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--seconds", type=float, default=30, help="each phase's length")
    p.add_argument("--no-next", dest="next", action="store_false", help="leave next out of the mix")
    p.add_argument("--only", type=kinds_of, default=[k for k, _ in MIX], metavar="KIND,...",
                   help="keep only these kinds of request in the mix and the heavy tenant's turns "
                        f"(of {', '.join(k for k, _ in MIX)}; e.g. get,ops,floor: what writes alone cost)")
    p.add_argument("--connections", type=int, metavar="N",
                   help="the server's --connections (default: its own default)")
    p.add_argument("--quick", action="store_true",
                   help="a smaller run: " + ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in QUICK.items()))
    p.add_argument("--store", help="build the store in this folder (default: a temporary one)")
    add_output_options(p, "tenants")
    a = p.parse_args(argv)
    if a.quick:
        vars(a).update(QUICK)
    run = Run("tenants", a.results)
    with tempfile.TemporaryDirectory() as d:
        db = str(Path(a.store or d) / "tenants.db")
        t = time.perf_counter()
        tenants = build(db, a)
        run.figures["setup_s"] = round(time.perf_counter() - t, 1)
        port = free_port()
        server = start_server(db, port, "hashing", 1,
                              *(("--connections", str(a.connections)) if a.connections else ()))
        try:
            phase(port, tenants, argparse.Namespace(**{**vars(a), "seconds": 2}), False)  # warm up
            base = phase(port, tenants, a, False)
            loaded = phase(port, tenants, a, True)
        finally:
            stop(server)
    run.figures.update({"namespaces": a.namespaces, "cells": sum(c for _, _, c in tenants), "clients": a.clients,
                        "seconds": a.seconds, "next": a.next,
                        "connections": a.connections or "default", "only": a.only})
    report(run, tenants, base, loaded)
    run.finish()


if __name__ == "__main__":
    main()
