"""Calibrate the soft-key threshold for the default embedder on the labelled pairs (tests/data/key_pairs.tsv).

Prints, per threshold, precision and recall of (a) cosine alone, the baseline, and (b) cosine then the
deterministic same/different check, which is what ingest does when no LLM is configured. Both compare
only keys about the same subject, as ingest does.


    .venv/bin/python -m benchmarks.calibrate_keys
"""

from __future__ import annotations

import argparse

import numpy as np

from benchmarks.harness import ROOT, Run, add_output_options
from pmem.adapters.embedders.onnx_embedder import OnnxEmbedder
from pmem.domain.extraction.key_identity import same_key, shortlist_phrase

THRESHOLDS = (0.5, 0.6, 0.65, 0.7, 0.72, 0.75, 0.8, 0.85, 0.9)


def precision_recall(decided: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    tp = int((decided & labels).sum())
    return tp / max(1, int(decided.sum())), tp / int(labels.sum())


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_options(p, "calibrate_keys")
    run = Run("calibrate_keys", p.parse_args(argv).results)
    rows = [line.split("\t") for line in (ROOT / "tests" / "data" / "key_pairs.tsv").read_text().splitlines()
            if line.strip() and not line.startswith("#")]
    labels = np.array([y.strip() == "1" for _, _, y in rows])
    embedder = OnnxEmbedder()
    a = embedder.embed([shortlist_phrase(x)[1] for x, _, _ in rows])
    b = embedder.embed([shortlist_phrase(y)[1] for _, y, _ in rows])
    cosine = (a * b).sum(axis=1)
    checked = np.array([same_key(x, y)[0] for x, y, _ in rows])
    grouped = np.array([shortlist_phrase(x)[0] == shortlist_phrase(y)[0] for x, y, _ in rows])  # same subject
    table = []
    for t in THRESHOLDS:
        alone = precision_recall(grouped & (cosine >= t), labels)
        both = precision_recall(grouped & (cosine >= t) & checked, labels)
        table.append({"threshold": t, "cosine alone: precision": alone[0], "cosine alone: recall": alone[1],
                      "cosine + check: precision": both[0], "cosine + check: recall": both[1]})
    run.table(table, f"{len(rows)} labelled pairs: {labels.sum()} same, {(~labels).sum()} near misses")
    chosen = next(r for r in table if r["threshold"] == 0.72)
    run.beside("cosine + check precision at 0.72", chosen["cosine + check: precision"], "cosine alone precision",
               chosen["cosine alone: precision"], "share")
    missed = [f"{x} / {y} ({c:.2f})" for (x, y, _), c, ok, lab in zip(rows, cosine, (cosine >= 0.72) & checked,
                                                                      labels, strict=True) if lab and not ok]
    print("same pairs not merged at 0.72:", "; ".join(missed))
    run.figures |= {"thresholds": table, "not_merged_at_0.72": missed}
    run.finish()

if __name__ == "__main__":
    main()
