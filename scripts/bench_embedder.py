#!/usr/bin/env python3
"""Measure the offline embedder (int8 MiniLM on onnxruntime) and its cache, in one run on one machine.

Texts: the 455 fact sentences of ``../shared/data/factconsolidation/factconsolidation_6k_context.txt``
(without their serial numbers), repeated to ``--texts``; each repeat gets a numeric suffix so that no two
texts are equal. Reports:

* ``load``: a fresh ``OnnxEmbedder().load()`` (imports, sha256 checks of model and tokenizer, session);
* ``batched``: texts/s through ``embed`` in batches of 64, best of ``--repeat`` runs after a warm-up;
* ``single``: milliseconds for one text (median of 50 calls);
* ``cached``: texts/s through ``CachedEmbedder`` over a SQLite cache that already holds every text
  (the model never runs: its counter is checked), against the batched model figure.

    .venv/bin/python scripts/bench_embedder.py [--texts 2048] [--repeat 3] [--threads N]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pmem.adapters.embedders.cache import CachedEmbedder, SqliteEmbeddingCache  # noqa: E402
from pmem.adapters.embedders.onnx_embedder import OnnxEmbedder  # noqa: E402

CONTEXT = ROOT.parent / "shared" / "data" / "factconsolidation" / "factconsolidation_6k_context.txt"


def texts(n: int) -> list[str]:
    base = [m.group(1) for line in CONTEXT.read_text().splitlines() if (m := re.fullmatch(r"\d+\. (.*)", line))]
    if not base:
        raise SystemExit(f"no fact lines in {CONTEXT}")
    return [base[i % len(base)] + ("" if i < len(base) else f" ({i // len(base)})") for i in range(n)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--texts", type=int, default=2048)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--threads", type=int, default=None, help="onnxruntime intra-op threads (default: its own)")
    args = p.parse_args()
    corpus = texts(args.texts)

    started = time.perf_counter()
    e = OnnxEmbedder(threads=args.threads)
    e.load()
    load = time.perf_counter() - started

    e.embed(corpus[:64])  # warm-up
    best = min(_timed(lambda: e.embed(corpus)) for _ in range(args.repeat))
    single = statistics.median(_timed(lambda t=t: e.embed([t])) for t in corpus[:50]) * 1000

    with tempfile.TemporaryDirectory() as d:
        cache = SqliteEmbeddingCache(Path(d) / "cache.db")
        CachedEmbedder(e, cache).embed(corpus)
        runs = e.runs
        cached = CachedEmbedder(e, cache)
        hit = min(_timed(lambda: cached.embed(corpus)) for _ in range(args.repeat))
        assert e.runs == runs, "a cached text ran the model"
        cache.close()

    print(f"texts: {len(corpus)} FactConsolidation sentences, batch 64, threads: {args.threads or 'default'}")
    print(f"load (imports, sha256 checks, session): {load:.2f} s")
    print(f"batched: {len(corpus) / best:,.0f} texts/s ({best:.2f} s)")
    print(f"single text: {single:.1f} ms (median of 50)")
    print(f"cached (SQLite, every text a hit): {len(corpus) / hit:,.0f} texts/s, "
          f"{best / hit:,.0f}x the model")


def _timed(fn: object) -> float:
    t = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - t


if __name__ == "__main__":
    main()
