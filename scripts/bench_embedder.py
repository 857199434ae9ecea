#!/usr/bin/env python3
"""Measure the offline embedder (int8 MiniLM on onnxruntime) and its cache, in one run on one machine.

Both model forms side by side: int8 activations (the default, ``onnx``) and float32 products
(``onnx-fp32``, the packaged model as it is).

Texts: the 455 fact sentences of ``../shared/data/factconsolidation/factconsolidation_6k_context.txt``
(without their serial numbers), repeated to ``--texts``; each repeat gets a numeric suffix so that no two
texts are equal. Reports:

* ``load``: a fresh ``OnnxEmbedder().load()`` (imports, sha256 checks of model and tokenizer, session);
* ``texts/s``: through ``embed`` (the int8 form runs each text alone, the float32 form batches of at most
  64 texts and 512 padded tokens), best of ``--repeat`` runs after a warm-up;
* ``single``: milliseconds for one text (median of 50 calls);
* ``cached``: texts/s through ``CachedEmbedder`` over a SQLite cache that already holds every text
  (the model never runs: its counter is checked), against the batched model figure.

    .venv/bin/python scripts/bench_embedder.py [--texts 2048] [--repeat 3] [--threads N]

``--sweep`` instead measures the session's thread settings (issue 19): texts/s of ``embed`` over
``--texts`` short ``key: value`` texts (what the vector index embeds) for each intra-op/inter-op thread
count, with spinning on (onnxruntime's default) and off, interleaved ``--repeat`` times, best of each;
``OnnxEmbedder``'s defaults are the fastest row.

    .venv/bin/python scripts/bench_embedder.py --sweep [--texts 1024] [--repeat 3]

``--budgets`` measures the batch cut instead: texts/s of ``embed`` for each token budget (padded tokens
per model run), over short ``key: value`` texts and over the FactConsolidation sentences, interleaved,
best of ``--repeat``, against 64 texts a run with no budget (the cut before the budget existed); it
measures the float32 form, the one that batches (the int8 form runs each text alone).

``--quality`` measures retrieval instead: LoCoMo evidence recall@1/5/10 of both forms (each question
against every turn of its conversation), from ``../shared/data/locomo`` (non-commercial licence: read
there, never copied).

    .venv/bin/python scripts/bench_embedder.py --quality

    .venv/bin/python scripts/bench_embedder.py --budgets [--texts 2048] [--repeat 3]
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
    p.add_argument("--sweep", action="store_true", help="measure the thread settings instead (a table)")
    p.add_argument("--budgets", action="store_true", help="measure the token budget per batch instead (a table)")
    p.add_argument("--quality", action="store_true",
                   help="LoCoMo evidence recall@k of both model forms instead (reads ../shared/data/locomo)")
    args = p.parse_args()
    if args.sweep:
        sweep(args.texts, args.repeat)
        return
    if args.budgets:
        budgets(args.texts, args.repeat)
        return
    if args.quality:
        quality()
        return
    corpus = texts(args.texts)
    rows = [measure(form, corpus, args) for form in FORMS]
    print(f"texts: {len(corpus)} FactConsolidation sentences, threads: {args.threads or 'default'}, "
          f"best of {args.repeat}")
    print("| model form | load s (imports, sha256 checks, session) | texts/s | vs float32 | single text ms "
          "| cached texts/s (SQLite, every text a hit) |")
    print("|---|---|---|---|---|---|")
    for form, (load, best, single, hit) in zip(FORMS, rows, strict=True):
        print(f"| {form} | {load:.2f} | {len(corpus) / best:,.0f} | {rows[1][1] / best:.2f}x | {single:.1f} | "
              f"{len(corpus) / hit:,.0f} |")


FORMS = ("int8 activations (onnx, the default)", "float32 products (onnx-fp32)")


def measure(form: str, corpus: list[str], args: argparse.Namespace) -> tuple[float, float, float, float]:
    """Load seconds, best batched seconds, median single-text ms and best all-cached seconds of one form."""
    started = time.perf_counter()
    e = OnnxEmbedder(threads=args.threads, dynamic=form == FORMS[0])
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
    return load, best, single, hit


LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo_conv0-4.json"
KS = (1, 5, 10)


def quality() -> None:
    """Evidence recall@k of both model forms on LoCoMo: each question (adversarial ones left out) ranks
    every turn of its conversation by cosine; recall@k is the share of its evidence turns in the top k."""
    import json

    import numpy as np

    conversations = json.loads(LOCOMO.read_text())
    forms = {FORMS[0]: OnnxEmbedder(), FORMS[1]: OnnxEmbedder(dynamic=False)}
    recall: dict[str, dict[int, list[float]]] = {f: {k: [] for k in KS} for f in forms}
    seconds = dict.fromkeys(forms, 0.0)
    for c in conversations:
        turns = [(t["dia_id"], f"{t['speaker']}: {t['text']}") for name, session in c["conversation"].items()
                 if name.startswith("session_") and isinstance(session, list) for t in session]
        asked = [q for q in c["qa"] if q.get("evidence") and q.get("category") != 5]
        for form, e in forms.items():
            started = time.perf_counter()
            scores = e.embed([q["question"] for q in asked]) @ e.embed([t for _, t in turns]).T
            seconds[form] += time.perf_counter() - started
            for row, q in zip(scores, asked, strict=True):
                ranked = [turns[j][0] for j in np.argsort(-row)]
                for k in KS:
                    recall[form][k].append(len(set(q["evidence"]) & set(ranked[:k])) / len(q["evidence"]))
    n = len(recall[FORMS[0]][1])
    print(f"LoCoMo {LOCOMO.name}: {len(conversations)} conversations, {n} questions (adversarial left out)")
    print("| model form | " + " | ".join(f"evidence recall@{k}" for k in KS) + " | embedding s |")
    print("|---|" + "---|" * (len(KS) + 1))
    for form in forms:
        cells = " | ".join(f"{sum(v) / len(v):.3f}" for v in recall[form].values())
        print(f"| {form} | {cells} | {seconds[form]:.1f} |")


SETTINGS = [(0, 1, True, 1), (1, 1, True, 1), (1, 1, False, 1), (2, 1, True, 1), (2, 1, False, 1),
            (2, 2, False, 1), (1, 1, False, 2), (1, 1, True, 2)]


def sweep(n: int, repeat: int) -> None:
    """Print texts/s per (intra-op, inter-op, spinning, batches at once), the default settings marked."""
    from pmem.adapters.embedders import onnx_embedder as oe

    corpus = [f"subject_{i}.capital: Object {i * 7919 % 1_000_000}" for i in range(n)]
    embedders = {s: oe.OnnxEmbedder(threads=s[0], inter_threads=s[1], spinning=s[2], parallel=s[3]) for s in SETTINGS}
    best = dict.fromkeys(SETTINGS, float("inf"))
    for e in embedders.values():
        e.embed(corpus[:64])  # load and warm up
    for _ in range(repeat):  # interleaved: a burst of load elsewhere hits every setting alike
        for s, e in embedders.items():
            best[s] = min(best[s], _timed(lambda e=e: e.embed(corpus)))
    default = (oe.INTRA_OP_THREADS, oe.INTER_OP_THREADS, oe.SPINNING, oe.PARALLEL_BATCHES)
    print(f"{n} texts, the default (int8) form, best of {repeat}; intra-op 0 = onnxruntime's default (one per core)")
    print("| intra-op | inter-op | spinning | batches at once | texts/s | vs default onnxruntime |")
    print("|---|---|---|---|---|---|")
    for s in SETTINGS:
        mark = " (chosen)" if s == default else ""
        print(f"| {s[0]} | {s[1]} | {'on' if s[2] else 'off'} | {s[3]}{mark} | {n / best[s]:,.0f} | "
              f"{best[SETTINGS[0]] / best[s]:.2f}x |")


BUDGETS = (None, 256, 512, 1024, 2048)  # None: 64 texts a run, however long


def budgets(n: int, repeat: int) -> None:
    """Print texts/s per token budget for short and sentence-long texts, the default marked."""
    from pmem.adapters.embedders import onnx_embedder as oe

    corpora = {"key: value": [f"subject_{i}.capital: Object {i * 7919 % 1_000_000}" for i in range(n)],
               "sentences": texts(n)}
    embedders = {b: oe.OnnxEmbedder(token_budget=b or 10**9, dynamic=False) for b in BUDGETS}  # the batching form
    best = {(c, b): float("inf") for c in corpora for b in BUDGETS}
    for e in embedders.values():
        e.embed(corpora["key: value"][:64])  # load and warm up
    for _ in range(repeat):
        for c, corpus in corpora.items():
            for b, e in embedders.items():
                best[c, b] = min(best[c, b], _timed(lambda e=e, corpus=corpus: e.embed(corpus)))
    print(f"{n} texts each, at most {oe.BATCH_SIZE} a run, best of {repeat}")
    print("| texts | token budget | texts/s | vs 64 a run, no budget |")
    print("|---|---|---|---|")
    for c in corpora:
        for b in BUDGETS:
            mark = " (chosen)" if b == oe.TOKEN_BUDGET else ""
            print(f"| {c} | {b or 'none'}{mark} | {n / best[c, b]:,.0f} | {best[c, None] / best[c, b]:.2f}x |")


def _timed(fn: object) -> float:
    t = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - t


if __name__ == "__main__":
    main()
