"""Soft key identity on the safety pair set (tests/data/key_pairs_safety.tsv): the offline default judge
against the LLM judge, in one run.

Both arms see the pairs as ingest does: keys about the same subject whose phrases' cosine (the offline
ONNX embedder) reaches the default threshold go to the judge; the rules (`settled_without_judge`) bind
every judge. Then the arms differ only in who answers what the rules leave open:

- **offline**: the deterministic same/different check (`same_key`), the default with no model;
- **llm**: `LlmKeyJudge` asking a model (any litellm model; the local route by default);
- **llm, no cosine gate**: every same-subject pair goes to the LLM judge, to show the model's own reading.

Each arm prints near misses merged (the goal is 0) and paraphrases merged (the goal is >= 80%).
Needs a model server for the LLM arms (`scripts/local-llm.sh 8090`, then
`.venv/bin/python -m benchmarks.key_judge --api-base http://127.0.0.1:8090/v1 --model openai/qwen`);
without `--api-base` only the offline arm runs:

    .venv/bin/python -m benchmarks.key_judge [--api-base URL] [--model openai/qwen]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from benchmarks.harness import ROOT, Run, add_output_options
from pmem.adapters.embedders.onnx_embedder import OnnxEmbedder
from pmem.adapters.service.soft_keys import DEFAULT_THRESHOLD
from pmem.domain.extraction.key_identity import same_key, settled_without_judge, shortlist_phrase

PAIRS = ROOT / "tests" / "data" / "key_pairs_safety.tsv"  # written by this project (tests/data/README.md)
Judge = Callable[[str, str], tuple[bool, str]]


def pairs() -> list[tuple[str, str, bool]]:
    rows = [line.split("\t") for line in PAIRS.read_text().splitlines() if line.strip() and not line.startswith("#")]
    return [(a, b, y.strip() == "1") for a, b, y in rows]


def gated(rows: list[tuple[str, str, bool]]) -> list[bool]:
    """Whether ingest would ask a judge about each pair: same subject and cosine >= the default threshold."""
    embedder = OnnxEmbedder()
    a = embedder.embed([shortlist_phrase(x)[1] for x, _, _ in rows])
    b = embedder.embed([shortlist_phrase(y)[1] for _, y, _ in rows])
    cosine = (np.asarray(a) * np.asarray(b)).sum(axis=1)
    return [bool(c >= DEFAULT_THRESHOLD and shortlist_phrase(x)[0] == shortlist_phrase(y)[0])
            for c, (x, y, _) in zip(cosine, rows, strict=True)]


def arm(rows: list[tuple[str, str, bool]], asked: list[bool], judge: Judge, rules: bool = True) -> dict[str, object]:
    """What one judge merges, with the rules first as ingest runs them (``rules=False``: the judge alone)."""
    merged, wrong, seconds, judged, fallbacks = [], [], 0.0, 0, 0
    for (a, b, same), ask in zip(rows, asked, strict=True):
        verdict = False
        if ask:
            settled = settled_without_judge(a, b) if rules else None
            t0 = time.perf_counter()
            judged += settled is None
            verdict, why = settled if settled is not None else judge(a, b)
            fallbacks += "deterministic:" in why  # the model failed or answered out of form
            seconds += time.perf_counter() - t0
        merged.append(verdict)
        if verdict and not same:
            wrong.append(f"{a} / {b}")
    positives = sum(s for _, _, s in rows)
    right = sum(m and s for m, (_, _, s) in zip(merged, rows, strict=True))
    return {"near_misses_merged": len(wrong), "near_misses": len(rows) - positives,
            "paraphrases_merged": right, "paraphrases": positives,
            "paraphrase_rate": round(right / positives, 3), "left_by_the_rules_to_the_judge": judged,
            "model_failed_so_the_rule_answered": fallbacks, "judge_seconds": round(seconds, 1),
            "wrong_merges": wrong}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--api-base", help="an OpenAI-compatible server for the LLM arms (none: offline arm only)")
    ap.add_argument("--model", default="openai/qwen", help="the litellm model name (default openai/qwen)")
    add_output_options(ap, "key_judge")
    a = ap.parse_args(argv)
    run = Run("key_judge", a.results)
    rows = pairs()
    asked = gated(rows)
    arms = {"cosine gate alone (baseline)": arm(rows, asked, lambda a, b: (True, "cosine"), rules=False),
            "offline": arm(rows, asked, same_key)}
    if a.api_base:
        from pmem.adapters.llm.client import LlmSettings
        from pmem.adapters.llm.extractor import LlmKeyJudge

        llm = LlmKeyJudge(LlmSettings(model=a.model, api_base=a.api_base))
        arms["llm"] = arm(rows, asked, llm)
        arms["llm, no cosine gate"] = arm(rows, [shortlist_phrase(x)[0] == shortlist_phrase(y)[0]
                                                 for x, y, _ in rows], llm)
    run.table([{"judge": name, **{k: v for k, v in r.items() if k != "wrong_merges"}} for name, r in arms.items()],
              f"Soft key identity on {len(rows)} labelled pairs ({sum(asked)} past the cosine gate)")
    for name, r in arms.items():
        if r["wrong_merges"] and r is not arms["cosine gate alone (baseline)"]:
            print(f"{name} merged near misses: {'; '.join(r['wrong_merges'])}")
    base = arms["cosine gate alone (baseline)"]
    run.beside("near misses merged, offline judge", arms["offline"]["near_misses_merged"],
               "near misses merged, cosine gate alone", base["near_misses_merged"], "pairs")
    if "llm" in arms:
        run.beside("LLM judge paraphrase rate", arms["llm"]["paraphrase_rate"], "offline judge paraphrase rate",
                   arms["offline"]["paraphrase_rate"], "share")
    run.figures |= {"pairs": len(rows), "asked_by_the_cosine_gate": sum(asked), "arms": arms}
    run.finish()

if __name__ == "__main__":
    main()
