"""Calibrate the soft-key threshold for the default embedder on the labelled pairs (tests/data/key_pairs.tsv).

Prints, per threshold, precision and recall of (a) cosine alone, the baseline, and (b) cosine then the
deterministic same/different check, which is what ingest does when no LLM is configured. Both compare
only keys about the same subject, as ingest does.
Run: .venv/bin/python scripts/calibrate_keys.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pmem.adapters.embedders.onnx_embedder import OnnxEmbedder  # noqa: E402
from pmem.domain.extraction.key_identity import same_key, shortlist_phrase  # noqa: E402

THRESHOLDS = (0.5, 0.6, 0.65, 0.7, 0.72, 0.75, 0.8, 0.85, 0.9)


def main() -> None:
    rows = [line.split("\t") for line in (ROOT / "tests" / "data" / "key_pairs.tsv").read_text().splitlines()
            if line.strip() and not line.startswith("#")]
    labels = np.array([y.strip() == "1" for _, _, y in rows])
    embedder = OnnxEmbedder()
    a = embedder.embed([shortlist_phrase(x)[1] for x, _, _ in rows])
    b = embedder.embed([shortlist_phrase(y)[1] for _, y, _ in rows])
    cosine = (a * b).sum(axis=1)
    checked = np.array([same_key(x, y)[0] for x, y, _ in rows])
    grouped = np.array([shortlist_phrase(x)[0] == shortlist_phrase(y)[0] for x, y, _ in rows])  # same subject
    print(f"{len(rows)} labelled pairs: {labels.sum()} same, {(~labels).sum()} near misses")
    print("| threshold | cosine alone: precision | recall | cosine + check: precision | recall |")
    print("|---|---|---|---|---|")
    for t in THRESHOLDS:
        cells = []
        for decided in (grouped & (cosine >= t), grouped & (cosine >= t) & checked):
            tp = int((decided & labels).sum())
            precision = tp / max(1, int(decided.sum()))
            cells += [f"{precision:.2f}", f"{tp / labels.sum():.2f}"]
        print(f"| {t} | " + " | ".join(cells) + " |")
    missed = [f"{x} / {y} ({c:.2f})" for (x, y, _), c, ok, lab in zip(rows, cosine, (cosine >= 0.72) & checked,
                                                                      labels, strict=True) if lab and not ok]
    print("same pairs not merged at 0.72:", "; ".join(missed))


if __name__ == "__main__":
    main()
