#!/usr/bin/env python3
"""Multi-hop context accuracy on FactConsolidation: graph-guided readout against the single-shot read.

The FactConsolidation context is ingested (template extractor) into a new store; for each question
(``--split mh`` multi-hop, ``sh`` single-hop, or ``all``) every arm builds a read context and the
deterministic metric asks: is a gold answer in it (case-insensitive substring)? Arms, all with the
offline ONNX MiniLM embedder for search and hop scoring:

* ``single-shot k=12``: the top 12 cells by cosine (SPEC §6's L);
* ``single-shot k=30``: the top 30 cells, the same cell budget the guided arm may reach;
* ``graph-guided``: the top 12 plus up to 3 hops x 6 facts followed value -> subject from the
  entities the question names (pmem.adapters.graph.multihop.graph_guided_context).

    .venv/bin/python scripts/bench_multihop.py [--split mh] [--show-misses] [--data ../shared/data/factconsolidation]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pmem.adapters.embedders.cache import CachedEmbedder  # noqa: E402
from pmem.adapters.embedders.onnx_embedder import OnnxEmbedder  # noqa: E402
from pmem.adapters.graph.multihop import graph_guided_context, single_shot_context  # noqa: E402
from pmem.adapters.service.ingest import Ingestor, make_extractor  # noqa: E402
from pmem.adapters.service.store import Store  # noqa: E402
from pmem.adapters.sources.records import read_records  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "factconsolidation"


def hit(context: list[str], answers: list[str]) -> bool:
    text = "\n".join(context).lower()
    return any(a.lower() in text for a in answers)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument("--split", choices=("mh", "sh", "all"), default="mh")
    p.add_argument("--show-misses", action="store_true", help="print the questions the guided arm misses")
    args = p.parse_args()
    questions = [json.loads(line) for line in (args.data / "questions_6k.jsonl").read_text().splitlines() if line]
    if args.split != "all":
        questions = [q for q in questions if f"_{args.split}_" in q["source"]]
    embedder = CachedEmbedder(OnnxEmbedder())
    with tempfile.TemporaryDirectory() as d, Store(Path(d) / "fc.db", embedder=embedder) as store:
        data = (args.data / "factconsolidation_6k_context.txt").read_bytes()
        t0 = time.perf_counter()
        n = sum(1 for _ in Ingestor(store, make_extractor("template"), source="fc").run(read_records(data, "lines")))
        print(f"ingested {n} records into {store.last_index()} events in {time.perf_counter() - t0:.1f} s")
        arms = {
            "single-shot k=12": lambda q: single_shot_context(store, q, 12),
            "single-shot k=30": lambda q: single_shot_context(store, q, 30),
            "graph-guided (12 + <=3x6)": lambda q: graph_guided_context(store, q, embedder, 12),
        }
        graph_guided_context(store, "warm-up", embedder, 1)  # model load and index build, untimed
        print(f"{len(questions)} questions ({args.split}); metric: a gold answer is in the read context")
        print(f"{'arm':28} {'hits':>9} {'accuracy':>9} {'mean cells':>11} {'ms/question':>12}")
        for name, read in arms.items():
            hits, cells, t0 = 0, 0, time.perf_counter()
            for q in questions:
                ctx = read(q["question"])
                hits += hit(ctx, q["answers"])
                cells += len(ctx)
                if args.show_misses and name.startswith("graph") and not hit(ctx, q["answers"]):
                    print(f"  miss: {q['question']} -> {q['answers']}")
            ms = (time.perf_counter() - t0) * 1000 / len(questions)
            print(f"{name:28} {hits:>4}/{len(questions):<4} {hits / len(questions):>8.1%} "
                  f"{cells / len(questions):>11.1f} {ms:>12.1f}")


if __name__ == "__main__":
    main()
