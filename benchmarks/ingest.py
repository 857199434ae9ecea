"""Measure ``pmem ingest`` against ``pmem apply`` of the same writes, in one run on one machine.

A synthetic FactConsolidation-style stream: ``--facts`` lines ``i. <cloze template filled in>.`` over
``--slots`` (subject, relation) slots drawn with a seeded RNG, so later lines override earlier ones.

* ``ingest``: ``pmem ingest STREAM --db NEW.db`` (extract, annotate against each head, write, print).
* ``apply``: ``pmem apply OPS.jsonl --db NEW.db`` of the accept operations ingest ends up writing
  (keys and values taken from ingest's receipts, untimed), as one batch: the cost of the writes alone.

Both run as subprocesses of the installed ``pmem`` (start-up included), interleaved ``--repeat`` times;
the best time of each is reported with facts/s and the ratio. Then the ingested store is checked: one
frontier cell per slot.

    .venv/bin/python -m benchmarks.ingest [--facts 20000] [--slots 12000] [--repeat 3] [--seed 1]

Then the split: in-process ingest of the FactConsolidation 6k context and of a synthetic
``--split-facts`` (18,000) stream from the same templates, with soft key identity on (the real ONNX
embedder, a cold embedding cache in the store file) and off, each into a fresh store: facts/s and the
seconds spent in extraction, identity (key embedding and shortlist), append (the store's writes) and
projections (catching the frontier and its tables up afterwards), plus the cells-to-keys ratio (frontier
cells over distinct extracted keys; 1.0 means no fragmentation and no wrong merge). ``--split-only``
skips the CLI comparison above.

Then search-ready after ingest: ``pmem ingest`` of a FactConsolidation-sized
stream (32k: 2,310 facts over 1,500 slots; 262k: 18,332 over 12,000) followed by the first
``pmem search``, each a whole process as a user runs them, with the search projections built as
ingest goes (``eager``, the default) and without (``lazy``: ``PMEM_EAGER_INDEX=0``, the first search
builds them), interleaved ``--repeat`` times, best total of each. The embedding share is the time
the ONNX embedder alone takes for the index's texts (measured in this process, after the runs) over
the eager total. ``--ready-only`` runs just this; ``--quick`` only the 32k stream, once.

    .venv/bin/python -m benchmarks.ingest --ready-only [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import SHARED_DATA, Run, add_output_options
from pmem.domain.extraction.cloze import TEMPLATES

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


def pmem_run(*args: str, env: dict[str, str] | None = None) -> tuple[float, bytes]:
    t = time.perf_counter()
    r = subprocess.run([PMEM, *args], capture_output=True, env=env)
    elapsed = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"pmem {' '.join(args)} failed: {r.stderr.decode()}")
    return elapsed, r.stdout


CONTEXT = SHARED_DATA / "factconsolidation" / "factconsolidation_6k_context.txt"


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


def split(bench: Run, args: argparse.Namespace) -> None:
    """Print the per-stage table for the 6k context and the synthetic stream, soft keys on and off."""
    synthetic, _ = stream(args.split_facts, args.split_slots, args.seed)
    inputs = [(f"synthetic {args.split_facts:,}", synthetic)]
    if CONTEXT.is_file():
        inputs.insert(0, ("FactConsolidation 6k", CONTEXT.read_text()))
    rows = []
    for name, text in inputs:
        for soft in (False, True):
            with tempfile.TemporaryDirectory() as d:
                r = split_run(text, Path(d) / "bench.db", soft)
            rows.append({"stream": name, "soft keys": "on" if soft else "off", "facts": r["facts"],
                         "seconds": r["total"], "facts/s": r["facts"] / r["total"], "extraction": r["extraction"],
                         "identity": r["identity"], "append": r["append"], "projections": r["projections"],
                         "keys": r["keys"], "cells": r["cells"], "cells/keys": r["cells"] / r["keys"],
                         "merges": r["merges"]})
        on, off = rows[-1], rows[-2]
        bench.beside(f"facts/s with soft keys, {name}", on["facts/s"], "facts/s without", off["facts/s"], "facts/s")
    bench.table(rows, "In-process ingest by stage (seconds)")
    bench.figures["split"] = rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--split-facts", type=int, default=18_000)
    p.add_argument("--split-slots", type=int, default=6_000)
    p.add_argument("--split-only", action="store_true")
    p.add_argument("--facts", type=int, default=20_000)
    p.add_argument("--slots", type=int, default=12_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--ready-only", action="store_true", help="only the search-ready comparison")
    p.add_argument("--quick", action="store_true", help="with --ready-only: the 32k stream, once (< 2 minutes)")
    add_output_options(p, "ingest")
    args = p.parse_args(argv)
    bench = Run("ingest", args.results)
    if not args.ready_only:
        if not args.split_only:
            cli(bench, args)
        split(bench, args)
    ready(bench, args)
    bench.finish()


READY_STREAMS = (("FactConsolidation 32k", 2_310, 1_500), ("FactConsolidation 262k", 18_332, 12_000))
QUERY = "What is the capital of Subject 3?"


def ready_run(tmp: Path, name: str, eager: bool) -> tuple[float, float]:
    """Seconds of ``pmem ingest`` and of the first ``pmem search`` after it, into a fresh store."""
    env = {"PMEM_EAGER_INDEX": "1" if eager else "0"}
    db = str(tmp / f"{name}-{'eager' if eager else 'lazy'}-{time.monotonic_ns()}.db")
    t_ingest, _ = pmem_run("ingest", str(tmp / f"{name}.txt"), "--db", db, env={**os.environ, **env})
    t_search, out = pmem_run("search", QUERY, "--db", db, env={**os.environ, **env})
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


def ready(bench: Run, args: argparse.Namespace) -> None:
    """Print ingest + first search, eager against lazy, per stream."""
    streams = READY_STREAMS[:1] if args.quick else READY_STREAMS
    repeat = 1 if args.quick else args.repeat
    rows = []
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
            n, seconds = embedding_seconds(text)
            rows += [{"stream": name, "facts": facts, "indexing": "eager" if eager else "lazy",
                      "ingest s": best[eager][0], "first search s": best[eager][1], "total s": sum(best[eager]),
                      "vs lazy": sum(best[eager]) / sum(best[False]), "texts embedded": n,
                      "embedding share of the total": seconds / sum(best[eager])} for eager in (True, False)]
            bench.beside(f"ingest + first search, eager, {name}", sum(best[True]), "the same, lazy",
                         sum(best[False]), "s")
    bench.table(rows, "Search-ready after ingest: ingest and the first search, each a whole process")
    bench.figures["ready"] = rows


def cli(bench: Run, args: argparse.Namespace) -> None:
    """The CLI comparison: ``pmem ingest`` against ``pmem apply`` of the same writes."""
    text, n_slots = stream(args.facts, args.slots, args.seed)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "stream.txt").write_text(text)
        _, out = pmem_run("ingest", str(tmp / "stream.txt"), "--db", str(tmp / "probe.db"))
        receipts = [json.loads(line) for line in out.splitlines()]
        ops = [{"op": r["requested"], "key": r["key"], "value": r["head"]["value"]}
               for r in receipts if r["event_index"] is not None]
        (tmp / "ops.jsonl").write_text("".join(json.dumps(o) + "\n" for o in ops))
        best = {"ingest": float("inf"), "apply": float("inf")}
        for i in range(args.repeat):
            t, _ = pmem_run("ingest", str(tmp / "stream.txt"), "--db", str(tmp / f"i{i}.db"))
            best["ingest"] = min(best["ingest"], t)
            t, _ = pmem_run("apply", str(tmp / "ops.jsonl"), "--db", str(tmp / f"a{i}.db"))
            best["apply"] = min(best["apply"], t)
        _, frontier = pmem_run("frontier", "--db", str(tmp / "i0.db"))
        cells = len(frontier.splitlines())
    assert cells == n_slots, (cells, n_slots)
    bench.table([{"command": f"pmem {name}", "seconds": t, "facts/s": args.facts / t} for name, t in best.items()],
                f"{args.facts:,} facts over {n_slots:,} slots; frontier after ingest: {cells:,} cells (checked)")
    bench.beside("pmem ingest s", best["ingest"], "pmem apply of the same writes s", best["apply"], "s")


if __name__ == "__main__":
    main()
