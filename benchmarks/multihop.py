"""Multi-hop reading (docs/reading.md#multi-hop-reading): single-shot, graph-guided and iterative reads.

Data, each ingested with the template extractor into a new store (offline ONNX MiniLM embedder):

* ``fc6k``: the FactConsolidation 6k context and its 40 multi-hop questions (MIT; ``--data``);
* ``syn2k``, ``syn18k``, ``syn32k``: synthetic streams of that many facts written in the cloze
  templates: chains of 2-4 hops asked as "the A of the B of the C of X", each with one updated
  intermediate link (the old value, written first, leads on to a different, stale answer), among
  decoy facts of the chain's entities and random filler facts.

Arms, all through ``Store.read`` (k=12): ``single-shot``; ``graph-guided`` (``hops=4``, offline);
``iterative`` (the LLM lookup planner, only with ``--llm``). For each: gold in context (a gold answer
is a substring of the context), mean tokens (MiniLM WordPiece), and for the synthetic streams how
often the best path runs through a stale intermediate value. With ``--llm URL`` the local reader
(``pmem.adapters.llm.reader``) also answers a sample of ``--llm-questions`` per data set from each
arm's context, scored by gold substring, next to the paper's iterative readout.

``--latency N``: read latency of ``hops=3`` at N cells with the hashing embedder (no model), p50/p99
over repeated reads, next to the single-shot read measured in the same run.

    .venv/bin/python -m benchmarks.multihop [--quick] [--sets fc6k,syn2k,...] [--llm http://127.0.0.1:8090/v1]
    .venv/bin/python -m benchmarks.multihop --latency 100000
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.harness import SHARED_DATA, Run, add_output_options, each, latency_ms, read_text
from pmem.adapters.service.ingest import Ingestor, make_extractor
from pmem.adapters.service.store import Store
from pmem.adapters.sources.records import read_records
from pmem.domain.extraction.cloze import TEMPLATES

DATA = SHARED_DATA / "factconsolidation"
PAPER = {"6k": 53, "64k": 37, "262k": 29}  # the paper's multi-hop accuracy with iterative readout, %
CLOZE = {rel: tpl for tpl, rel in TEMPLATES.values()}
# How a synthetic question names each chained relation: written apart from the hop policy's synonyms,
# with a paraphrase where English has one, so the benchmark does not only replay the policy's table.
ASKED: dict[str, tuple[str, ...]] = {
    "spouse": ("spouse", "partner", "husband or wife"),
    "citizenship": ("country of citizenship", "nationality"),
    "capital": ("capital", "capital city"),
    "author": ("author", "writer"),
    "ceo": ("chief executive officer", "CEO"),
    "developer": ("developer",),
    "employer": ("employer",),
    "founded_by": ("founder",),
    "birthplace": ("city of birth", "birthplace"),
    "head_of_state": ("head of state",),
    "chairperson": ("chairperson", "chair"),
    "religion": ("religion", "faith"),
    "country_of_origin": ("country of origin",),
    "head_coach": ("head coach",),
    "director": ("director",),
}
SYLLABLES = "ka ro mi ve lu sa te no ri da zo pe qui fa lo be tu xi gar mon del vin sor lan cor bel".split()


@dataclass
class Question:
    question: str
    answers: list[str]
    stale: list[str] = field(default_factory=list)  # stale intermediate values (synthetic only)


def name(rng: random.Random, used: set[str]) -> str:
    while True:
        n = " ".join("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize() for _ in range(2))
        if n not in used:
            used.add(n)
            return n


def line(subject: str, relation: str, obj: str) -> str:
    return CLOZE[relation].replace("[X]", subject).replace("__", obj) + "."


def chain(rng: random.Random, used: set[str]) -> tuple[list[str], list[str], Question]:
    """(early lines, late lines, question): a 2-4 hop chain whose hop ``i`` was updated: the early
    lines hold the old link and its own continuation to a stale answer."""
    rels = rng.sample(sorted(ASKED), rng.randint(2, 4))
    ents = [name(rng, used) for _ in range(len(rels) + 1)]
    late = [line(ents[j], r, ents[j + 1]) for j, r in enumerate(rels)]
    i = rng.randrange(len(rels) - 1)  # an intermediate link: its value is not the answer
    stale = [name(rng, used) for _ in range(len(rels) - i)]
    early = [line(ents[i], rels[i], stale[0])]
    early += [line(stale[j - i - 1], r, stale[j - i]) for j, r in enumerate(rels) if j > i]
    for e in ents[:-1]:  # decoys: other facts of the chain's entities
        r = rng.choice([x for x in CLOZE if x not in rels and x != "located_in"])
        late.append(line(e, r, name(rng, used)))
    words = " of the ".join(rng.choice(ASKED[r]) for r in reversed(rels))
    q = Question(f"What is the {words} of {ents[0]}?", [ents[-1]], stale[:-1])
    return early, late, q


def synthetic(size: int, seed: int = 7) -> tuple[list[str], list[Question]]:
    """About ``size`` fact lines: chains (70%) and filler, every old link before its update."""
    rng, used = random.Random(seed), set[str]()
    early: list[str] = []
    late: list[str] = []
    questions: list[Question] = []
    while len(early) + len(late) < size * 0.7:
        e, l_, q = chain(rng, used)
        early += e
        late += l_
        questions.append(q)
    rels = [r for r in CLOZE if r != "located_in"]
    filler = [line(name(rng, used), rng.choice(rels), name(rng, used)) for _ in range(size - len(early) - len(late))]
    rng.shuffle(filler)
    rng.shuffle(early)
    rng.shuffle(late)
    half = len(filler) // 2
    lines = filler[:half] + early + filler[half:] + late
    return lines, questions


def factconsolidation(data: Path) -> tuple[list[str], list[Question]]:
    qs = [json.loads(x) for x in read_text(data / "questions_6k.jsonl").splitlines() if "_mh_" in x]
    lines = read_text(data / "factconsolidation_6k_context.txt").splitlines()
    return lines, [Question(q["question"], q["answers"]) for q in qs]


def contains(text: str, answers: list[str]) -> bool:
    t = text.lower()
    return any(a.lower() in t for a in answers)


def score_arm(store: Store, questions: list[Question], read: Callable[[str], Any],
              answer: Callable[[str, str], str] | None, sample: int) -> dict[str, Any]:
    """Gold in context, tokens, stale paths over ``questions``; answers over the first ``sample``."""
    gold = tokens = stale = right = asked = 0
    for n, q in enumerate(questions):
        r = read(q.question)
        gold += contains(r.context, q.answers)
        tokens += r.tokens
        stale += bool(q.stale and r.paths and any(contains(r.paths[0], [s]) for s in q.stale))
        if answer is not None and n < sample:
            asked += 1
            right += contains(answer(q.question, r.context), q.answers)
    return {"n": len(questions), "gold": gold, "tokens": tokens / max(1, len(questions)), "stale": stale,
            "asked": asked, "right": right}


def ingest(store: Store, lines: list[str]) -> float:
    """Write ``lines`` through the template extractor; the seconds it took."""
    t0 = time.perf_counter()
    for _ in Ingestor(store, make_extractor("template"), source="bench").run(
            read_records("\n".join(lines).encode(), "lines")):
        pass
    return time.perf_counter() - t0


def run_set(run: Run, label: str, lines: list[str], questions: list[Question], args: argparse.Namespace) -> None:
    from pmem.adapters.embedders.cache import CachedEmbedder
    from pmem.adapters.embedders.onnx_embedder import OnnxEmbedder

    answer = None
    if args.llm:
        from pmem.adapters.llm.reader import LLMReader

        answer = LLMReader(args.llm, args.llm_model).answer
    with tempfile.TemporaryDirectory() as d, Store(Path(d) / "mh.db", embedder=CachedEmbedder(OnnxEmbedder())) as store:
        seconds = ingest(store, lines)
        store.read("warm-up", k=1, hops=1)  # vector index and graph built, untimed
        arms: dict[str, Callable[[str], Any]] = {
            "single-shot k=12": lambda q: store.read(q, k=12),
            "graph-guided k=12 hops=4": lambda q: store.read(q, k=12, hops=4),
        }
        if args.llm:
            arms["iterative k=12 (LLM planner)"] = lambda q: store.read(q, k=12, iterative=True)
        rows = []
        for arm, read in arms.items():
            qs = questions[:args.llm_questions] if arm.startswith("iterative") else questions
            s = score_arm(store, qs, read, answer, args.llm_questions)
            rows.append({"arm": arm, "gold in context %": 100 * s["gold"] / s["n"], "questions": s["n"],
                         "tokens": s["tokens"], "stale path": s["stale"],
                         "answered": f"{s['right']}/{s['asked']}" if s["asked"] else None})
        run.table(rows, f"{label}: {len(lines)} facts, {store.last_index()} events, {len(questions)} questions "
                        f"(ingest and index {seconds:.0f} s)")
    run.beside(f"graph-guided gold in context, {label}", rows[1]["gold in context %"], "single-shot gold in context",
               rows[0]["gold in context %"], "%")
    run.figures[label] = rows


def latency(run: Run, cells: int, reads: int) -> None:
    """p50/p99 of ``read(hops=3)`` at ``cells`` cells (hashing embedder), next to the single-shot read."""
    from pmem.adapters.embedders.hashing_embedder import HashingEmbedder
    from pmem.adapters.graph.multihop import hop_read

    lines, questions = synthetic(cells, seed=11)
    with tempfile.TemporaryDirectory() as d, Store(Path(d) / "lat.db", embedder=HashingEmbedder()) as store:
        seconds = ingest(store, lines)
        t0 = time.perf_counter()
        store.read("warm-up", k=1, hops=3)
        print(f"{store.last_index()} events written in {seconds:.0f} s; first read (vector index built): "
              f"{time.perf_counter() - t0:.1f} s", file=sys.stderr)
        qs = [q.question for q in questions[:reads]]
        arms: dict[str, Callable[[str], Any]] = {
            "single-shot k=12": lambda q: store.read(q, k=12),
            "hops=3 k=12": lambda q: store.read(q, k=12, hops=3),
            "the hop policy alone": lambda q: hop_read(store, q, store.embedder, hops=3),
        }
        lat = {label: latency_ms(each(read, qs)) for label, read in arms.items()}
        store.accept("bench.after", "a write")
        t0 = time.perf_counter()
        store.read(qs[0], k=12, hops=3)
        after_write_ms = (time.perf_counter() - t0) * 1000
        events = store.last_index()
    run.table([{"read": label, "reads": len(qs), **ms} for label, ms in lat.items()],
              f"Read latency at {events:,} events (ms); hops=3 right after a write: {after_write_ms:.0f} ms")
    run.beside("hops=3 read p50", lat["hops=3 k=12"]["p50_ms"], "single-shot read p50",
               lat["single-shot k=12"]["p50_ms"], "ms")
    run.figures["latency"] = {**lat, "hops3_after_a_write_ms": after_write_ms}


def data_set(label: str, data: Path) -> tuple[list[str], list[Question]]:
    if label == "fc6k":
        return factconsolidation(data)
    size = label.removeprefix("syn").removesuffix("k")
    if not label.startswith("syn") or not label.endswith("k") or not size.isdigit():
        raise SystemExit(f"--sets: unknown data set {label!r} (fc6k, or synNk such as syn2k)")
    return synthetic(int(size) * 1000)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument("--quick", action="store_true", help="fc6k and syn2k, 20 questions each (under 2 minutes)")
    p.add_argument("--sets", default="fc6k,syn2k,syn18k,syn32k")
    p.add_argument("--questions", type=int, default=40, help="questions per data set")
    p.add_argument("--llm", help="OpenAI-compatible /v1 URL of the reader (and the iterative planner)")
    p.add_argument("--llm-model", default="qwen")
    p.add_argument("--llm-questions", type=int, default=10, help="questions per data set the LLM answers")
    p.add_argument("--latency", type=int, help="measure read latency at this many cells instead")
    p.add_argument("--reads", type=int, default=200)
    add_output_options(p, "multihop")
    args = p.parse_args(argv)
    run = Run("multihop", args.results)
    if args.latency:
        latency(run, args.latency, args.reads)
        run.finish()
        return
    if args.quick:
        args.sets, args.questions, args.llm_questions = "fc6k,syn2k", 20, min(args.llm_questions, 5)
    if args.llm:
        os.environ["PMEM_LLM_BASE"], os.environ["PMEM_LLM_MODEL"] = args.llm, args.llm_model
    print(f"paper (P-Mem, 4B reader, iterative readout), multi-hop accuracy: {PAPER}")
    run.figures["paper_multihop_accuracy"] = PAPER
    for label in args.sets.split(","):
        lines, questions = data_set(label, args.data)
        rng = random.Random(3)
        questions = rng.sample(questions, min(args.questions, len(questions))) if label != "fc6k" \
            else questions[:args.questions]
        run_set(run, label, lines, questions, args)
    run.finish()


if __name__ == "__main__":
    main()
