"""``next`` at scale: stored scores read by a top-k query, beside a plain ``get``, by ``Store`` and ``/v1/next``.

A synthetic store of ``--cells`` cells (default 100,000): subjects with 4 relations each (``node_type``
persona), whose values are drawn from a pool of names a fifth the size of the subjects (so values are
shared: association edges and multi-hop chains), and one cell in 20 contested (the candidates). Timed:

* the graph projection's catch-up from an empty projection, and the first scoring, from scratch (PageRank,
  Louvain, candidate scores, stored): the baseline;
* a 100-operation write, a ``next`` right after it (it answers from the stored scores, without waiting),
  and the time until ``next`` is current: the score worker's catch-up and re-scoring, carried on from the
  stored PageRank and communities;
* ``next --k 5`` (with and without ``--previous``) p50/p99 through ``Store.what_next``, beside ``Store.get``;
* ``GET /v1/next?k=5`` p50/p99 on a real ``pmem serve``, beside ``GET /v1/cells/KEY``.

    .venv/bin/python -m benchmarks.graph_next [--cells 100000] [--calls 300]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks.harness import Run, add_output_options, each, latency_ms, timed
from benchmarks.serving import serving
from pmem.adapters.graph.scores import stored_values
from pmem.adapters.service.store import Store, open_store

RELATIONS = ("author", "spouse", "employer", "friend")


def build(db: str, cells: int, seed: int = 1) -> Store:
    """``cells`` accepts (one in 20 then contested) over ``cells / 4`` subjects, written without the graph."""
    os.environ["PMEM_EAGER_INDEX"] = "0"  # no search index: only the graph is timed
    rng = random.Random(seed)
    subjects = max(1, cells // len(RELATIONS))
    names = max(2, subjects // 5)
    store = open_store(db, embedder="hashing")
    ops = [{"op": "accept", "key": f"s{i}.{r}", "value": f"Name {rng.randrange(names)}", "node_type": "persona"}
           for i in range(subjects) for r in RELATIONS][:cells]
    ops += [{"op": "contest", "key": op["key"], "value": f"Name {rng.randrange(names)}"} for op in ops[::20]]
    for i in range(0, len(ops), 20_000):
        store.apply(ops[i:i + 20_000])
    return store


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cells", type=int, default=100_000)
    p.add_argument("--calls", type=int, default=300, help="timed calls per figure")
    add_output_options(p, "graph_next")
    a = p.parse_args(argv)
    run = Run("graph_next", a.results)
    with tempfile.TemporaryDirectory(prefix="pmem-bench-next-") as tmp:
        db = str(Path(tmp) / "next.db")
        t0 = time.perf_counter()
        store = build(db, a.cells)
        print(f"store: {a.cells} cells, {store.last_index()} events in {time.perf_counter() - t0:.1f} s",
              file=sys.stderr)
        graph = store.projections["graph"]
        rows_s = timed(graph.catch_up)
        score_s = timed(lambda: graph.refresh_scores(stored_values))
        rng = random.Random(2)
        store.apply([{"op": rng.choice(("accept", "contest")), "key": f"s{rng.randrange(a.cells // 4)}.friend",
                      "value": f"Name {rng.randrange(a.cells // 20)}"} for _ in range(100)])
        t0 = time.perf_counter()
        stale = store.what_next(5, wait=0)  # the stored answer; it starts the score worker
        stale_s = time.perf_counter() - t0
        fresh = store.what_next(5, wait=None)  # waits for the worker's round: catch-up and re-scoring
        rescore_s = time.perf_counter() - t0
        print(f"right after the write: as_of {stale[0]['as_of']}; when current: as_of {fresh[0]['as_of']}",
              file=sys.stderr)
        keys = [f"s{i}.author" for i in range(0, a.cells // len(RELATIONS), 97)]
        get_s = each(lambda i: store.get(keys[i % len(keys)]), range(a.calls))
        next_s = each(lambda _: store.what_next(5), range(a.calls))
        picks = [f"s{i}" for i in range(a.calls)]
        prev_s = each(lambda i: store.what_next(5, previous=picks[i]), range(a.calls))
        store.close()
        with serving(db, "--insecure-local") as url, httpx.Client(base_url=url, timeout=None) as c:
            c.get("/v1/next", params={"k": 5}).raise_for_status()  # the server's own first read
            http_get = each(lambda i: c.get(f"/v1/cells/{keys[i % len(keys)]}").raise_for_status(), range(a.calls))
            http_next = each(lambda _: c.get("/v1/next", params={"k": 5}).raise_for_status(), range(a.calls))
    run.table([{"step": "graph rows: catch-up from empty", "s": round(rows_s, 2)},
               {"step": "scores from scratch: PageRank, Louvain, candidates, stored (baseline)",
                "s": round(score_s, 2)},
               {"step": "100-operation write: next right after it (stored scores, no wait)", "s": round(stale_s, 3)},
               {"step": "100-operation write: until next is current (worker: catch-up, re-scoring carried on)",
                "s": round(rescore_s, 2)}],
              f"maintaining the scores at {a.cells:,} cells")
    rows = [("Store.get (baseline)", get_s), ("Store.what_next(5)", next_s),
            ("Store.what_next(5, previous=...)", prev_s), ("GET /v1/cells/KEY (baseline)", http_get),
            ("GET /v1/next?k=5", http_next)]
    run.table([{"call": name, **latency_ms(s)} for name, s in rows], f"next at {a.cells:,} cells, {a.calls} calls")
    for name, s in rows:
        run.figures[name] = latency_ms(s)
    run.figures.update(cells=a.cells, rows_catch_up_s=rows_s, scoring_s=score_s, next_after_write_s=stale_s,
                       rescore_after_write_s=rescore_s)
    run.beside("re-scoring after a 100-operation write", rescore_s, "scoring from scratch", score_s, "s")
    run.beside("Store.what_next p99", latency_ms(next_s)["p99_ms"], "Store.get p99", latency_ms(get_s)["p99_ms"], "ms")
    run.beside("GET /v1/next p99", latency_ms(http_next)["p99_ms"], "GET /v1/cells p99",
               latency_ms(http_get)["p99_ms"], "ms")
    run.finish()


if __name__ == "__main__":
    main()
