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
`.venv/bin/python scripts/bench_key_judge.py --api-base http://127.0.0.1:8090/v1 --model openai/qwen`);
without `--api-base` only the offline arm runs.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from pmem.adapters.embedders.onnx_embedder import OnnxEmbedder
from pmem.adapters.service.soft_keys import DEFAULT_THRESHOLD
from pmem.domain.extraction.key_identity import same_key, settled_without_judge, shortlist_phrase

PAIRS = Path(__file__).resolve().parents[1] / "tests" / "data" / "key_pairs_safety.tsv"
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


def arm(rows: list[tuple[str, str, bool]], asked: list[bool], judge: Judge) -> dict[str, object]:
    """What one judge merges, with the rules first, as ingest runs them."""
    merged, wrong, seconds, judged, fallbacks = [], [], 0.0, 0, 0
    for (a, b, same), ask in zip(rows, asked, strict=True):
        verdict = False
        if ask:
            settled = settled_without_judge(a, b)
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--api-base", help="an OpenAI-compatible server for the LLM arms (none: offline arm only)")
    ap.add_argument("--model", default="openai/qwen", help="the litellm model name (default openai/qwen)")
    a = ap.parse_args()
    rows = pairs()
    asked = gated(rows)
    out: dict[str, object] = {"pairs": len(rows), "asked_by_the_cosine_gate": sum(asked),
                              "offline": arm(rows, asked, same_key)}
    if a.api_base:
        from pmem.adapters.llm.client import LlmSettings
        from pmem.adapters.llm.extractor import LlmKeyJudge

        llm = LlmKeyJudge(LlmSettings(model=a.model, api_base=a.api_base))
        out["llm"] = arm(rows, asked, llm)
        out["llm_no_cosine_gate"] = arm(rows, [shortlist_phrase(x)[0] == shortlist_phrase(y)[0] for x, y, _ in rows],
                                        llm)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
