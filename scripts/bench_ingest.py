#!/usr/bin/env python3
"""Measure ``pmem ingest`` against ``pmem apply`` of the same writes, in one run on one machine.

A synthetic FactConsolidation-style stream: ``--facts`` lines ``i. <cloze template filled in>.`` over
``--slots`` (subject, relation) slots drawn with a seeded RNG, so later lines override earlier ones.

* ``ingest``: ``pmem ingest STREAM --db NEW.db`` (extract, annotate against each head, write, print).
* ``apply``: ``pmem apply OPS.jsonl --db NEW.db`` of the accept operations ingest ends up writing
  (keys and values taken from ingest's receipts, untimed), as one batch: the cost of the writes alone.

Both run as subprocesses of the installed ``pmem`` (start-up included), interleaved ``--repeat`` times;
the best time of each is reported with facts/s and the ratio. Then the ingested store is checked: one
frontier cell per slot.

    .venv/bin/python scripts/bench_ingest.py [--facts 20000] [--slots 12000] [--repeat 3] [--seed 1]

Then (issue 4) the split: in-process ingest of the FactConsolidation 6k context and of a synthetic
``--split-facts`` (18,000) stream from the same templates, with soft key identity on (the real ONNX
embedder, a cold embedding cache in the store file) and off, each into a fresh store: facts/s and the
seconds spent in extraction, identity (key embedding and shortlist), append (the store's writes) and
projections (catching the frontier and its tables up afterwards), plus the cells-to-keys ratio (frontier
cells over distinct extracted keys; 1.0 means no fragmentation and no wrong merge). ``--split-only``
skips the CLI comparison above.

Then (issue 19, ``--ready``) search-ready after ingest: ``pmem ingest`` of a FactConsolidation-sized
stream (32k: 2,310 facts over 1,500 slots; 262k: 18,332 over 12,000) followed by the first
``pmem search``, each a whole process as a user runs them, with the search projections built as
ingest goes (``eager``, the default) and without (``lazy``: ``PMEM_EAGER_INDEX=0``, the first search
builds them), interleaved ``--repeat`` times, best total of each. The embedding share is the time
the ONNX embedder alone takes for the index's texts (measured in this process, after the runs) over
the eager total. ``--ready-only`` runs just this; ``--quick`` only the 32k stream, once.

    .venv/bin/python scripts/bench_ingest.py --ready-only [--quick]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pmem.domain.extraction.cloze import TEMPLATES  # noqa: E402

PMEM = str(Path(sys.executable).parent / "pmem")


def stream(facts: int, slots: int, seed: int) -> tuple[str, int]:
    rng = random.Random(seed)
    pids = sorted(TEMPLATES)
    slot_list = [(f"Subject {i}", rng.choice(pids)) for i in range(slots)]
    lines, used = ["Here is a list of facts:"], set()
    for i in range(facts):
        subject, pid = rng.choice(slot_list)
        used.add((subject, TEMPLATES[pid][1]))
        sentence = TEMPLATES[pid][0].replace("[X]", subject).replace("__", f"Object {rng.randrange(10**6)}")
        lines.append(f"{i}. {sentence}.")
    return "\n".join(lines) + "\n", len(used)


def run(*args: str, env: dict[str, str] | None = None) -> tuple[float, bytes]:
    t = time.perf_counter()
    r = subprocess.run([PMEM, *args], capture_output=True, env=env)
    elapsed = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"pmem {' '.join(args)} failed: {r.stderr.decode()}")
    return elapsed, r.stdout


CONTEXT = ROOT.parent / "shared" / "data" / "factconsolidation" / "factconsolidation_6k_context.txt"


def split_run(text: str, db: Path, soft_keys: bool) -> dict[str, float]:
    """One in-process ingest into a fresh store: timings by stage, facts, keys and cells."""
    from pmem.adapters.service.ingest import Ingestor, make_identity
    from pmem.adapters.service.store import Store
    from pmem.adapters.sources.records import read_records
    from pmem.domain.extraction.template import TemplateExtractor

    started = time.perf_counter()
    with Store(db) as store:
        t0 = time.perf_counter()
        identity = make_identity(store, "on" if soft_keys else "off", "template", None, 0.72)
        load = time.perf_counter() - t0
        ingestor = Ingestor(store, TemplateExtractor(), identity=identity)
        receipts = list(ingestor.run(read_records(text.encode(), "lines")))
        t0 = time.perf_counter()
        store.catch_up()
        projections = time.perf_counter() - t0
        cells = sum(1 for c in store.frontier() if not c.key.startswith("_"))
    total = time.perf_counter() - started
    facts = [r for r in receipts if r.get("form")]
    keys = {r.get("extracted_key", r["key"]) for r in facts}
    return {"total": total, "facts": len(facts), "keys": len(keys), "cells": cells,
            "extraction": ingestor.timings["extraction"], "identity": ingestor.timings["identity"] + load,
            "append": ingestor.timings["append"], "projections": projections,
            "merges": identity.merges if identity is not None else 0}


def split(args: argparse.Namespace) -> None:
    """Print the per-stage table for the 6k context and the synthetic stream, soft keys on and off."""
    synthetic, _ = stream(args.split_facts, args.split_slots, args.seed)
    inputs = [(f"synthetic {args.split_facts:,}", synthetic)]
    if CONTEXT.is_file():
        inputs.insert(0, ("FactConsolidation 6k", CONTEXT.read_text()))
    print("| stream | soft keys | facts | seconds | facts/s | extraction | identity | append | projections "
          "| keys | cells | cells/keys | merges |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, text in inputs:
        for soft in (False, True):
            with tempfile.TemporaryDirectory() as d:
                r = split_run(text, Path(d) / "bench.db", soft)
            print(f"| {name} | {'on' if soft else 'off'} | {r['facts']:,.0f} | {r['total']:.2f} | "
                  f"{r['facts'] / r['total']:,.0f} | {r['extraction']:.2f} | {r['identity']:.2f} | "
                  f"{r['append']:.2f} | {r['projections']:.2f} | {r['keys']:,.0f} | {r['cells']:,.0f} | "
                  f"{r['cells'] / r['keys']:.3f} | {r['merges']:.0f} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--split-facts", type=int, default=18_000)
    p.add_argument("--split-slots", type=int, default=6_000)
    p.add_argument("--split-only", action="store_true")
    p.add_argument("--facts", type=int, default=20_000)
    p.add_argument("--slots", type=int, default=12_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--ready-only", action="store_true", help="only the search-ready comparison (issue 19)")
    p.add_argument("--quick", action="store_true", help="with --ready-only: the 32k stream, once (< 2 minutes)")
    args = p.parse_args()
    if args.ready_only:
        ready(args)
        return
    if not args.split_only:
        cli(args)
    split(args)
    ready(args)


READY_STREAMS = (("FactConsolidation 32k", 2_310, 1_500), ("FactConsolidation 262k", 18_332, 12_000))
QUERY = "What is the capital of Subject 3?"


def ready_run(tmp: Path, name: str, eager: bool) -> tuple[float, float]:
    """Seconds of ``pmem ingest`` and of the first ``pmem search`` after it, into a fresh store."""
    import os

    env = {"PMEM_EAGER_INDEX": "1" if eager else "0"}
    db = str(tmp / f"{name}-{'eager' if eager else 'lazy'}-{time.monotonic_ns()}.db")
    t_ingest, _ = run("ingest", str(tmp / f"{name}.txt"), "--db", db, env={**os.environ, **env})
    t_search, out = run("search", QUERY, "--db", db, env={**os.environ, **env})
    assert out.strip(), "the search found nothing"
    return t_ingest, t_search


def embedding_seconds(text: str) -> tuple[int, float]:
    """The texts the vector index of ``text``'s store embeds, and the seconds the ONNX model takes for them."""
    from pmem.adapters.embedders.onnx_embedder import OnnxEmbedder
    from pmem.adapters.service.store import Store

    with tempfile.TemporaryDirectory() as d:
        subprocess.run([PMEM, "ingest", "-", "--db", str(Path(d) / "e.db"), "--embedder", "hashing"],
                       input=text.encode(), capture_output=True, check=True)
        store = Store(Path(d) / "e.db", embedder="hashing")
        projection = store.vector_search().projection
        projection.catch_up()
        texts = projection.texts(0, projection.count())
        store.close()
    model = OnnxEmbedder()
    model.load()
    started = time.perf_counter()
    model.embed(texts)
    return len(texts), time.perf_counter() - started


def ready(args: argparse.Namespace) -> None:
    """Print ingest + first search, eager against lazy, per stream."""
    streams = READY_STREAMS[:1] if args.quick else READY_STREAMS
    repeat = 1 if args.quick else args.repeat
    print("| stream | facts | indexing | ingest s | first search s | total s | vs lazy |")
    print("|---|---|---|---|---|---|---|")
    shares = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for name, facts, slots in streams:
            text, _ = stream(facts, slots, args.seed)
            (tmp / f"{name.split()[-1]}.txt").write_text(text)
            best: dict[bool, tuple[float, float]] = {}
            for _ in range(repeat if facts < 10_000 else 1):
                for eager in (True, False):
                    t = ready_run(tmp, name.split()[-1], eager)
                    if eager not in best or sum(t) < sum(best[eager]):
                        best[eager] = t
            for eager in (True, False):
                i, s = best[eager]
                print(f"| {name} | {facts:,} | {'eager' if eager else 'lazy (today)'} | {i:.2f} | {s:.2f} | "
                      f"{i + s:.2f} | {(i + s) / sum(best[False]):.2f}x |")
            n, seconds = embedding_seconds(text)
            shares.append(f"{name}: {n:,} texts embedded in {seconds:.2f} s = "
                          f"{seconds / sum(best[True]):.0%} of the eager total")
    print("\n".join(shares))


def cli(args: argparse.Namespace) -> None:
    """The CLI comparison: ``pmem ingest`` against ``pmem apply`` of the same writes."""
    text, n_slots = stream(args.facts, args.slots, args.seed)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "stream.txt").write_text(text)
        _, out = run("ingest", str(tmp / "stream.txt"), "--db", str(tmp / "probe.db"))
        receipts = [json.loads(line) for line in out.splitlines()]
        ops = [{"op": r["requested"], "key": r["key"], "value": r["head"]["value"]}
               for r in receipts if r["event_index"] is not None]
        (tmp / "ops.jsonl").write_text("".join(json.dumps(o) + "\n" for o in ops))
        best = {"ingest": float("inf"), "apply": float("inf")}
        for i in range(args.repeat):
            t, _ = run("ingest", str(tmp / "stream.txt"), "--db", str(tmp / f"i{i}.db"))
            best["ingest"] = min(best["ingest"], t)
            t, _ = run("apply", str(tmp / "ops.jsonl"), "--db", str(tmp / f"a{i}.db"))
            best["apply"] = min(best["apply"], t)
        _, frontier = run("frontier", "--db", str(tmp / "i0.db"))
        cells = len(frontier.splitlines())
    assert cells == n_slots, (cells, n_slots)
    print(f"{args.facts} facts over {n_slots} slots; frontier after ingest: {cells} cells (checked)")
    for name, t in best.items():
        print(f"{name:>6}: {t:.2f} s, {args.facts / t:,.0f} facts/s")
    print(f"ingest / apply time: {best['ingest'] / best['apply']:.2f}")


if __name__ == "__main__":
    main()
