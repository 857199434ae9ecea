"""Seconds per extraction prompt against a live model server (the local LLM route, scripts/local-llm.sh).

Sends each of a few short records once through the LLM extractor (``pmem.adapters.llm.extractor``, up to 3
attempts per record as in ingest) and reports, per record, the seconds, the model calls and the facts
kept; then the median seconds per record and per model call. The baseline, measured in the same
process on the same records, is the template extractor (no model). Needs ``PMEM_LLM_BASE`` (or
``--base``); it is not part of any test run.

    PMEM_LLM_BASE=http://127.0.0.1:8080/v1 .venv/bin/python -m benchmarks.llm [--records 4]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from benchmarks.harness import Run, add_output_options
from pmem.adapters.llm.client import LlmSettings, _litellm
from pmem.adapters.llm.extractor import LlmExtractor
from pmem.domain.extraction.slot_modes import DEFAULT_SLOT_MODE, SLOT_MODES
from pmem.domain.extraction.template import TemplateExtractor

RECORDS = [
    "My home city is now Porto.",
    "I think my 5K PB is now 24:59.",
    "Anna says the project budget is now $40k.",
    "We had pasta for lunch.",
    "Update: mug 1 has been moved from cabinet 2 to countertop 1.",
    "The capital of France is Paris.",
]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", default=os.environ.get("PMEM_LLM_BASE"), help="OpenAI-compatible /v1 URL")
    p.add_argument("--model", default=os.environ.get("PMEM_LLM_MODEL", "openai/qwen"))
    p.add_argument("--records", type=int, default=4, help=f"how many of the {len(RECORDS)} records to send")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per model call")
    p.add_argument("--slots", choices=SLOT_MODES, default=DEFAULT_SLOT_MODE,
                   help=f"when the slot card is asked (default {DEFAULT_SLOT_MODE}, as ingest)")
    p.add_argument("--no-verify", dest="verify", action="store_false",
                   help="skip the verification pass (one blind question per fact)")
    add_output_options(p, "llm")
    a = p.parse_args(argv)
    if not a.base:
        raise SystemExit("benchmarks.llm: give --base or set PMEM_LLM_BASE (scripts/local-llm.sh serves one)")
    run = Run("llm", a.results)
    records = RECORDS[:max(1, min(a.records, len(RECORDS)))]
    _litellm()  # the import (seconds) is not the model's time

    template = TemplateExtractor()
    started = time.perf_counter()
    for _ in range(1000):
        for i, text in enumerate(records, 1):
            template.extract(text, i)
    template_s = (time.perf_counter() - started) / (1000 * len(records))

    extractor = LlmExtractor(LlmSettings(a.model, a.base, timeout_s=a.timeout), verify=a.verify, slots=a.slots)
    rows = []
    for i, text in enumerate(records, 1):
        calls = extractor.model.calls
        started = time.perf_counter()
        x = extractor.extract(text, i)
        seconds = time.perf_counter() - started
        n = extractor.model.calls - calls
        got = [(f.key, f.value, f.status) for f in x.facts] if not x.failed else f"FAILED: {x.reason}"
        rows.append({"record": text, "seconds": seconds, "model calls": n, "s per call": seconds / max(n, 1),
                     "facts or reason": got})
    run.table(rows, f"LLM extractor ({a.model} at {a.base}, slots {a.slots}, verify {a.verify})")
    med = statistics.median(r["seconds"] for r in rows)
    run.beside("LLM extractor s per record, median", med, "template extractor s per record", template_s, "s")
    run.figures |= {"records": rows, "median_s_per_record": med,
                    "median_s_per_call": statistics.median(r["s per call"] for r in rows),
                    "template_s_per_record": template_s}
    run.finish()

if __name__ == "__main__":
    main()
