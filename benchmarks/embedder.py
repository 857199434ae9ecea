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

    .venv/bin/python -m benchmarks.embedder [--texts 2048] [--repeat 3] [--threads N]

``--sweep`` instead measures the session's thread settings: texts/s of ``embed`` over
``--texts`` short ``key: value`` texts (what the vector index embeds) for each intra-op/inter-op thread
count, with spinning on (onnxruntime's default) and off, interleaved ``--repeat`` times, best of each;
``OnnxEmbedder``'s defaults are the fastest row.

    .venv/bin/python -m benchmarks.embedder --sweep [--texts 1024] [--repeat 3]

``--budgets`` measures the batch cut instead: texts/s of ``embed`` for each token budget (padded tokens
per model run), over short ``key: value`` texts and over the FactConsolidation sentences, interleaved,
best of ``--repeat``, against 64 texts a run with no budget (the cut before the budget existed); it
measures the float32 form, the one that batches (the int8 form runs each text alone).

``--quality`` measures retrieval instead: LoCoMo evidence recall@1/5/10 of both forms (each question
against every turn of its conversation), from ``../shared/data/locomo`` (non-commercial licence: read
there, never copied).

    .venv/bin/python -m benchmarks.embedder --quality

    .venv/bin/python -m benchmarks.embedder --budgets [--texts 2048] [--repeat 3]
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.harness import SHARED_DATA, Run, add_output_options, best_of, read_text, timed
from pmem.adapters.embedders.cache import CachedEmbedder, SqliteEmbeddingCache
from pmem.adapters.embedders.onnx_embedder import OnnxEmbedder

CONTEXT = SHARED_DATA / "factconsolidation" / "factconsolidation_6k_context.txt"


def texts(n: int) -> list[str]:
    base = [m.group(1) for line in read_text(CONTEXT).splitlines() if (m := re.fullmatch(r"\d+\. (.*)", line))]
    if not base:
        raise SystemExit(f"no fact lines in {CONTEXT}")
    return [base[i % len(base)] + ("" if i < len(base) else f" ({i // len(base)})") for i in range(n)]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--texts", type=int, default=2048)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--threads", type=int, default=None, help="onnxruntime intra-op threads (default: its own)")
    p.add_argument("--sweep", action="store_true", help="measure the thread settings instead (a table)")
    p.add_argument("--budgets", action="store_true", help="measure the token budget per batch instead (a table)")
    p.add_argument("--quality", action="store_true",
                   help="LoCoMo evidence recall@k of both model forms instead (reads ../shared/data/locomo)")
    add_output_options(p, "embedder")
    args = p.parse_args(argv)
    run = Run("embedder", args.results)
    if args.sweep:
        sweep(run, args.texts, args.repeat)
    elif args.budgets:
        budgets(run, args.texts, args.repeat)
    elif args.quality:
        quality(run)
    else:
        speed(run, args)
    run.finish()


def speed(run: Run, args: argparse.Namespace) -> None:
    corpus = texts(args.texts)
    rows = []
    for form in FORMS:
        load, best, single, hit = measure(form, corpus, args)
        rows.append({"model form": form, "load s (imports, sha256 checks, session)": load,
                     "texts/s": len(corpus) / best, "single text ms": single,
                     "cached texts/s (SQLite, every text a hit)": len(corpus) / hit})
    run.table(rows, f"{len(corpus)} FactConsolidation sentences, threads: {args.threads or 'default'}, "
                    f"best of {args.repeat}")
    run.beside("int8 texts/s", rows[0]["texts/s"], "float32 texts/s", rows[1]["texts/s"], "texts/s")
    run.beside("cached texts/s (int8)", rows[0]["cached texts/s (SQLite, every text a hit)"],
               "the model's texts/s (int8)", rows[0]["texts/s"], "texts/s")
    run.figures["forms"] = rows


FORMS = ("int8 activations (onnx, the default)", "float32 products (onnx-fp32)")


def measure(form: str, corpus: list[str], args: argparse.Namespace) -> tuple[float, float, float, float]:
    """Load seconds, best batched seconds, median single-text ms and best all-cached seconds of one form."""
    started = time.perf_counter()
    e = OnnxEmbedder(threads=args.threads, dynamic=form == FORMS[0])
    e.load()
    load = time.perf_counter() - started
    e.embed(corpus[:64])  # warm-up
    best = best_of(lambda: e.embed(corpus), args.repeat)
    single = statistics.median(timed(lambda t=t: e.embed([t])) for t in corpus[:50]) * 1000
    with tempfile.TemporaryDirectory() as d:
        cache = SqliteEmbeddingCache(Path(d) / "cache.db")
        CachedEmbedder(e, cache).embed(corpus)
        runs = e.runs
        cached = CachedEmbedder(e, cache)
        hit = best_of(lambda: cached.embed(corpus), args.repeat)
        assert e.runs == runs, "a cached text ran the model"
        cache.close()
    return load, best, single, hit


LOCOMO = SHARED_DATA / "locomo" / "locomo_conv0-4.json"
KS = (1, 5, 10)


def quality(run: Run) -> None:
    """Evidence recall@k of both model forms on LoCoMo: each question (adversarial ones left out) ranks
    every turn of its conversation by cosine; recall@k is the share of its evidence turns in the top k."""
    import json

    import numpy as np

    conversations = json.loads(read_text(LOCOMO))
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
    rows = [{"model form": form, **{f"evidence recall@{k}": sum(v) / len(v) for k, v in recall[form].items()},
             "embedding s": seconds[form]} for form in forms]
    run.table(rows, f"LoCoMo {LOCOMO.name}: {len(conversations)} conversations, {n} questions (adversarial left out)")
    run.beside("int8 evidence recall@5", rows[0]["evidence recall@5"], "float32 evidence recall@5",
               rows[1]["evidence recall@5"], "recall")
    run.figures["quality"] = rows


SETTINGS = [(0, 1, True, 1), (1, 1, True, 1), (1, 1, False, 1), (2, 1, True, 1), (2, 1, False, 1),
            (2, 2, False, 1), (1, 1, False, 2), (1, 1, True, 2)]


def sweep(run: Run, n: int, repeat: int) -> None:
    """Print texts/s per (intra-op, inter-op, spinning, batches at once), the default settings marked."""
    from pmem.adapters.embedders import onnx_embedder as oe

    corpus = [f"subject_{i}.capital: Object {i * 7919 % 1_000_000}" for i in range(n)]
    embedders = {s: oe.OnnxEmbedder(threads=s[0], inter_threads=s[1], spinning=s[2], parallel=s[3]) for s in SETTINGS}
    best = dict.fromkeys(SETTINGS, float("inf"))
    for e in embedders.values():
        e.embed(corpus[:64])  # load and warm up
    for _ in range(repeat):  # interleaved: a burst of load elsewhere hits every setting alike
        for s, e in embedders.items():
            best[s] = min(best[s], timed(lambda e=e: e.embed(corpus)))
    default = (oe.INTRA_OP_THREADS, oe.INTER_OP_THREADS, oe.SPINNING, oe.PARALLEL_BATCHES)
    rows = [{"intra-op": s[0], "inter-op": s[1], "spinning": "on" if s[2] else "off",
             "batches at once": f"{s[3]}{' (chosen)' if s == default else ''}", "texts/s": n / best[s],
             "vs default onnxruntime": best[SETTINGS[0]] / best[s]} for s in SETTINGS]
    run.table(rows, f"{n} texts, the default (int8) form, best of {repeat}; intra-op 0 = onnxruntime's default "
                    f"(one per core)")
    run.beside("texts/s, the chosen settings", n / best[default], "texts/s, onnxruntime's defaults",
               n / best[SETTINGS[0]], "texts/s")
    run.figures["sweep"] = rows


BUDGETS = (None, 256, 512, 1024, 2048)  # None: 64 texts a run, however long


def budgets(run: Run, n: int, repeat: int) -> None:
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
                best[c, b] = min(best[c, b], timed(lambda e=e, corpus=corpus: e.embed(corpus)))
    rows = [{"texts": c, "token budget": f"{b or 'none'}{' (chosen)' if b == oe.TOKEN_BUDGET else ''}",
             "texts/s": n / best[c, b], "vs 64 a run, no budget": best[c, None] / best[c, b]}
            for c in corpora for b in BUDGETS]
    run.table(rows, f"{n} texts each, at most {oe.BATCH_SIZE} a run, best of {repeat}")
    for c in corpora:
        run.beside(f"texts/s, {c}, the chosen budget", n / best[c, oe.TOKEN_BUDGET], "texts/s, 64 a run, no budget",
                   n / best[c, None], "texts/s")
    run.figures["budgets"] = rows


if __name__ == "__main__":
    main()
