"""FactConsolidation 6k through the Mem0-shaped door (docs/integrations.md#mem0): stale values presented.

Every fact of the context is written with one ``Memory.add`` (P-Mem's template extractor), then each
single-hop question is read with ``Memory.search(question, limit=12)``. A question counts as stale when
its results present a value its fact has since been updated away from. The baseline, measured in the
same run on the same store and embedder, is what Mem0 does offline (``infer=False``): every fact kept as
its own memory and searched by similarity, so an updated fact's old sentence stays findable.

    .venv/bin/python -m benchmarks.mem0_door [--context FILE --questions FILE] [--limit 12]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.factconsolidation import contains_gold, load_facts, load_questions, overridden
from benchmarks.fc_streams import FC_DIR
from benchmarks.harness import Run, add_output_options
from benchmarks.validity_fc import slot_chains
from benchmarks.validity_probes import norm
from pmem.domain.extraction.cloze import match_cloze

LIMIT = 12
USER = "fc"


def superseded_sentences(facts: Sequence[str]) -> set[str]:
    """The fact sentences whose slot a later fact gave another value."""
    chains = slot_chains(facts)
    out = set()
    for f in facts:
        m = match_cloze(f[:-1] if f.endswith(".") else f)
        if m is not None and norm(chains[(m[1], m[0].relation)][-1]) != norm(m[2]):
            out.add(f)
    return out


def door_stale(results: list[dict[str, Any]], slots: dict[tuple[str, str], tuple[str, set[str]]]) -> bool:
    """A result ``subject.relation: value`` that gives a slot a value it was updated away from."""
    for r in results:
        key, _, value = r["memory"].partition(": ")
        subject, _, relation = key.rpartition(".")
        if (subject, relation) in slots and norm(value) in slots[(subject, relation)][1]:
            return True
    return False


def tally(questions: Sequence[Any], search: Callable[[str], list[str]], stale: Callable[[list[str]], bool],
          gold_text: Callable[[list[str]], str]) -> dict[str, Any]:
    rows = [(q, search(q.question)) for q in questions]
    return {"questions": len(rows), "stale presented": sum(stale(r) for _, r in rows),
            "gold in results": sum(contains_gold(gold_text(r), q.answers) for q, r in rows)}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--context", type=Path, default=FC_DIR / "factconsolidation_6k_context.txt")
    p.add_argument("--questions", type=Path, default=FC_DIR / "questions_6k.jsonl")
    p.add_argument("--limit", type=int, default=LIMIT)
    add_output_options(p, "mem0_door")
    a = p.parse_args(argv)
    import pmem
    from pmem.integrations.mem0 import Memory

    facts, run = load_facts(a.context), Run("mem0_door", a.results)
    questions = [q for q in load_questions(a.questions) if not q.multi]
    slots, old = overridden(facts), superseded_sentences(facts)
    with tempfile.TemporaryDirectory() as d, pmem.open(Path(d) / "door.db") as store:
        door = Memory(store=store)
        t0 = time.perf_counter()
        for f in facts:
            door.add(f, user_id=USER)
        add_s = time.perf_counter() - t0
        store.apply([{"op": "accept", "key": f"fact{i}", "value": f, "namespace": "append"}
                     for i, f in enumerate(facts)])
        t0 = time.perf_counter()
        ours = tally(questions, lambda q: door.search(q, user_id=USER, limit=a.limit)["results"],
                     lambda r: door_stale(r, slots), lambda r: "\n".join(m["memory"] for m in r))
        search_s = time.perf_counter() - t0
        kept = tally(questions, lambda q: [f.cell.value for f in store.search(q, a.limit, namespace="append")],
                     lambda r: any(s in old for s in r), lambda r: "\n".join(r))
    run.table([{"arm": "Mem0-shaped door (add, search)", **ours},
               {"arm": "every fact kept, similarity search (Mem0 infer=False)", **kept}],
              f"FactConsolidation 6k: {len(facts)} facts ({len(old)} superseded), {len(questions)} single-hop "
              f"questions, top {a.limit}; add {add_s:.1f} s, door searches {search_s:.1f} s")
    run.figures.update({"door": ours, "every_fact_kept": kept, "add_s": round(add_s, 1),
                        "search_s": round(search_s, 1)})
    run.beside("questions shown a stale value, door", ours["stale presented"],
               "every fact kept", kept["stale presented"], "questions")
    run.finish()


if __name__ == "__main__":
    main()
