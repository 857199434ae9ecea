"""The validity benchmark: the paper's §4.2-4.3 probes, P-Mem beside honest baselines.

    .venv/bin/python -m benchmarks.validity                    # the full deterministic run
    .venv/bin/python -m benchmarks.validity --quick            # small n, one short synthetic stream
    PMEM_LLM_BASE=http://127.0.0.1:8080/v1 .venv/bin/python -m benchmarks.validity --llm  # + the LLM reader

Every arm shares one embedder (all-MiniLM-L6-v2 int8 ONNX, cached), one token counter (the same
model's WordPiece tokenizer) and one context budget in tokens. Deterministic metrics (no LLM):
``gold`` the current value is in the context, ``stale`` a superseded value of the asked slot is in
the context, ``valid`` gold and not stale (the context cannot mislead), ``head`` for a cell read the
asked cell's head is the answer. Value checks are made line by line on lines that name the asked
subject, so a distractor that happens to share a location does not count.

The data (FactConsolidation, ALFWorld's vocabulary) is read from ``../shared/data``. The plot, in ``--plots DIR``:
``validity_by_length.png`` (valid context by revisions per object; single-hop accuracy and stale rate by stream
length; every arm).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness import Run, add_output_options, git_commit, line_panel, read_text, save_figure
from benchmarks.validity_fc import FC_ARMS, FC_DIR, bench_fc, fc_facts, synthetic_fc
from benchmarks.validity_probes import Env, bench_contest, bench_retraction, bench_revision

LS = (1, 2, 4, 8)
QUICK_N, QUICK_LS, QUICK_SYNTHETIC = 4, (1, 4), [2000]


# -- tables -------------------------------------------------------------------------------------------
def revision_rows(rev: dict[str, Any]) -> list[dict[str, Any]]:
    def cell(s: dict[str, Any]) -> str:
        head = f" / head {s['head']}%" if "head" in s else ""
        llm = f" / LLM {s['llm_correct']}%" if "llm_correct" in s else ""
        return f"valid {s['valid']}% / gold {s['gold']}% / stale {s['stale']}%{head}{llm}; {s['tokens']} tok"

    return [{"arm": a, **{L: cell(rev[L][a]) for L in rev}} for a in next(iter(rev.values()))]


def retraction_rows(ret: dict[str, Any]) -> list[dict[str, Any]]:
    def outcome(s: dict[str, Any]) -> str:
        return f"{s['recovered']}% / {s['wrong']}% / {s['lost']}%"

    return [{"noise events d": d, "commit (retention)": outcome(s["commit"]), "CRUD (no retention)": outcome(s["CRUD"]),
             "raw top-10: gold v1 / v2 present": f"{s['raw']['gold']}% / {s['raw']['stale']}%"}
            for d, s in ret.items()]


def fc_rows(fc: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for a in (a for a in FC_ARMS if a in fc):
        s, m = fc[a]["single"], fc[a].get("multi", {})
        rows.append({"arm": a, "single-hop gold (top-12) %": s.get("gold"), "single-hop top-1 %": s.get("top1"),
                     "single-hop stale %": s.get("stale"), "multi-hop gold %": m.get("gold"), "chars": s["chars"],
                     "tokens": s["tokens"]})
    return rows


def report(run: Run, r: dict[str, Any]) -> None:
    meta = r["meta"]
    print(f"Validity benchmark, commit {meta['commit']}, budget {meta['budget']} tokens, embedder {meta['embedder']}, "
          f"n={meta['n']} per L, deterministic reader{' + LLM' if meta['llm'] else ''}.\n")
    run.table(revision_rows(r["revision"]), "Revision chains: valid context (gold present, no superseded value) / "
                                            "gold present / stale present / head is the answer; mean tokens")
    run.table(retraction_rows(r["retraction"]), "Retraction: recovered / wrong / lost")
    c = r["contest"]
    run.table([{"arm": a, **c[a]} for a in ("commit", "CRUD")], f"Contest, then resolve (n={c['n']}), %")
    for name, fc in r["factconsolidation"].items():
        run.table(fc_rows(fc), f"FactConsolidation {name}: {fc['facts']} facts, {fc['slots']} slots, "
                               f"{fc['single-hop questions with an update chain']} single-hop questions with an "
                               f"update chain")
        single = {a: fc[a]["single"] for a in ("P-Mem", "raw")}
        run.beside(f"P-Mem single-hop gold %, {name}", single["P-Mem"]["gold"], "raw top-k gold %",
                   single["raw"]["gold"], "%")
    deepest = list(r["revision"])[-1]
    run.beside(f"commit read valid context %, {deepest}", r["revision"][deepest]["commit"]["valid"],
               "raw top-k valid context %", r["revision"][deepest]["raw"]["valid"], "%")


# -- plots --------------------------------------------------------------------------------------------
def plot_by_length(r: dict[str, Any], path: Path) -> None:
    """Valid context by revision depth, then single-hop accuracy and stale rate by the stream's length in facts."""
    rev = r["revision"]
    ls = [int(k.split("=")[1]) for k in rev]
    streams = sorted(r["factconsolidation"].values(), key=lambda fc: fc["facts"])
    x = [fc["facts"] for fc in streams]
    arms = [a for a in FC_ARMS if all(a in fc for fc in streams)]

    def metric(name: str) -> dict[str, list[float]]:
        return {a: [fc[a]["single"].get(name, 0.0) for fc in streams] for a in arms}

    def draw(axes: list[Any]) -> None:
        line_panel(axes[0], ls, {a: [rev[f"L={L}"][a]["valid"] for L in ls] for a in next(iter(rev.values()))},
                   "revisions per object L (log scale)", "valid context: gold, no stale value (%)",
                   "Revision chains", logx=True)
        line_panel(axes[1], x, metric("gold"), "stream length (facts, log scale)",
                   "accuracy: gold value in context (%)", "FactConsolidation: single-hop accuracy", logx=True)
        line_panel(axes[2], x, metric("stale"), "stream length (facts, log scale)",
                   "stale rate: superseded value in context (%)", "FactConsolidation: stale rate", logx=True)
        for ax in axes:
            ax.set_ylim(-5, 105)

    save_figure(draw, path, panels=3, suptitle=f"Validity by length: every arm within {r['meta']['budget']} "
                                               f"tokens of context")
    print(f"plot: {path}", file=sys.stderr)


# -- the run ------------------------------------------------------------------------------------------
def measure(a: argparse.Namespace, n: int, ls: Sequence[int], sizes: Sequence[int]) -> dict[str, Any]:
    from pmem.adapters.embedders.cache import CachedEmbedder, MemoryEmbeddingCache
    from pmem.adapters.embedders.onnx_embedder import OnnxEmbedder
    from pmem.adapters.service.reader import TokenCounter

    llm = None
    if a.llm:
        from pmem.adapters.llm.reader import LLMReader

        llm = LLMReader.from_env()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        env = Env(CachedEmbedder(OnnxEmbedder(), MemoryEmbeddingCache()), TokenCounter(), a.budget, Path(tmp), llm)
        results: dict[str, Any] = {"meta": {"commit": git_commit(), "budget": a.budget, "n": n, "seed": a.seed,
                                            "embedder": env.embedder.name, "llm": llm is not None}}
        results["revision"] = bench_revision(env, n, ls, a.seed)
        print(f"revision chains done {time.perf_counter() - t0:.0f}s", file=sys.stderr)
        results["retraction"] = bench_retraction(env, n, (0, 32), a.seed)
        results["contest"] = bench_contest(env, n, a.seed)
        print(f"retraction, contest done {time.perf_counter() - t0:.0f}s", file=sys.stderr)
        fc_text = read_text(FC_DIR / "factconsolidation_6k_context.txt")
        qs = [json.loads(x) for x in read_text(FC_DIR / "questions_6k.jsonl").splitlines() if x.strip()]
        if a.quick:  # the first single-hop and multi-hop questions
            qs = qs[:8] + qs[40:44]
        results["factconsolidation"] = {"6k": bench_fc(env, "6k", fc_facts(fc_text), qs)}
        for size in sizes:
            facts, sq = synthetic_fc(size, a.seed)
            results["factconsolidation"][f"synthetic {size}"] = bench_fc(env, f"s{size}", facts, sq)
            print(f"synthetic {size} done {time.perf_counter() - t0:.0f}s", file=sys.stderr)
    results["meta"]["seconds"] = round(time.perf_counter() - t0, 1)
    return results


def sizes_list(text: str) -> list[int]:
    try:
        return [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected fact counts like 2000,5000, got {text!r}") from None


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=140, help="revision cases per L, and retraction cases per d")
    p.add_argument("--quick", action="store_true",
                   help="n=4, L in 1 and 4, 12 of the 6k questions, one synthetic stream of 2,000 facts")
    p.add_argument("--budget", type=int, default=1024, help="context budget in tokens, shared by every arm")
    p.add_argument("--synthetic", type=sizes_list, default=[2000, 5000, 18000],
                   help="synthetic FactConsolidation sizes in facts (comma list; '' none; default 2000,5000,18000)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--llm", action="store_true", help="also run the LLM reader (needs PMEM_LLM_BASE)")
    p.add_argument("--replot", type=Path, help="print the tables and draw the plot from this results.json only")
    add_output_options(p, "validity")
    a = p.parse_args(argv)
    run = Run("validity", a.results)
    if a.replot is not None:
        results = json.loads(read_text(a.replot))
    else:
        n, ls = (QUICK_N, QUICK_LS) if a.quick else (a.n, LS)
        results = measure(a, n, ls, QUICK_SYNTHETIC if a.quick else a.synthetic)
    report(run, results)
    plot_by_length(results, a.plots / "validity_by_length.png")
    run.figures |= {k: results[k] for k in ("meta", "revision", "retraction", "contest", "factconsolidation")}
    run.finish()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
