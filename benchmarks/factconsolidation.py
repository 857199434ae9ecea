"""MemoryAgentBench FactConsolidation through P-Mem (docs/field.md#memoryagentbench-factconsolidation).

The context's facts are written in order through the template extractor into a new store (ONNX MiniLM).
Single-hop questions read ``store.read(q, k=12)``; multi-hop ones ``store.read(q, k=12, hops=N)`` (the
graph-guided read, which takes as many hops as the question names relations, at least N). Figures per
size and hop kind: gold in context (a gold answer is a normalized substring of the context), answer
accuracy with the reader (a gold answer is a normalized substring of the reply: the benchmark's metric),
tokens per question (MiniLM WordPiece), and stale values presented (questions whose context shows an
overridden value of a slot as its value). Same-run baselines: the single-shot read of the multi-hop
questions, and with ``--raw`` plain RAG for the single-hop ones (the 12 fact sentences nearest the
question, every version of a slot included).

Data: ``--context FILE --questions FILE`` (MemoryAgentBench's format: numbered facts; JSON lines with
``question``, ``answers`` and ``source``/``qa_pair_id`` naming ``_sh_`` or ``_mh_``), or ``--size`` with
one or more of 6k (the shared 6k files), 32k, 64k, 262k or a number of facts: generated streams
(benchmarks/fc_streams.py), deterministic by ``--seed``; ``--write DIR`` keeps them. Several sizes draw
``factconsolidation.png`` (accuracy and gold in context against context length).

The reader answers from every arm's context: ``--reader none`` (figures that need no model); by default
the local model route (``PMEM_LLM_BASE``, ``PMEM_LLM_MODEL``); any litellm model name otherwise
(``--reader openai/gpt-4o-mini``). ``--replies FILE`` keeps each reply as it comes and replays it on a rerun.

    .venv/bin/python -m benchmarks.factconsolidation --size 6k,32k,64k,262k --reader none
    .venv/bin/python -m benchmarks.factconsolidation --context ctx.txt --questions q.jsonl --questions-per-kind 40
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.fc_streams import FC_DIR, SIZES, generate
from benchmarks.harness import Run, add_output_options, line_panel, read_text, save_figure
from benchmarks.validity_fc import fc_facts, slot_chains
from benchmarks.validity_probes import has, norm
from pmem.domain.extraction.cloze import match_cloze
from pmem.projections.graph import entity_slug

K = 12
KEY_LINE = re.compile(r"^([^\s=]+)\.([a-z0-9_]+) = (.+)$")
PUBLISHED = {  # MemoryAgentBench (arXiv 2507.05257 v4), SH / MH %, the best published memory system per size
    "32k": {"system": "Cognee", "sh": 39, "mh": 4}, "64k": {"system": "Cognee", "sh": 31, "mh": 5},
    "262k": {"system": "HippoRAG-v2", "sh": 54, "mh": 5}}


@dataclass
class Question:
    question: str
    answers: list[str]
    multi: bool


@dataclass
class Tally:
    """One (size, hop kind, arm): counts over its questions."""

    n: int = 0
    gold: int = 0
    tokens: int = 0
    stale: int = 0  # questions whose context presents at least one overridden value
    asked: int = 0
    right: int = 0
    answers: list[dict[str, Any]] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        return {"questions": self.n, "gold in context %": pct(self.gold, self.n),
                "tokens": round(self.tokens / max(1, self.n), 1), "stale presented": self.stale,
                "answered %": pct(self.right, self.asked) if self.asked else None, "answered": self.asked}


def pct(a: int, b: int) -> float:
    return round(100 * a / b, 1) if b else 0.0


def contains_gold(text: str, answers: Sequence[str]) -> bool:
    """The benchmark's metric: some gold answer is a substring of ``text``, both normalized."""
    return any(has(text, a) for a in answers)


def overridden(facts: Sequence[str]) -> dict[tuple[str, str], tuple[str, set[str]]]:
    """(subject slug, relation) -> (current value, the values it overrode), from the stream's fact lines."""
    out = {}
    for (subject, rel), values in slot_chains(facts).items():
        old = {norm(v) for v in values[:-1]} - {norm(values[-1])}
        if old:
            out[(entity_slug(subject), rel)] = (values[-1], old)
    return out


def stale_lines(context: str, slots: dict[tuple[str, str], tuple[str, set[str]]]) -> int:
    """How many lines of the context give a slot one of the values it overrode: a cell line
    (``key = value``, a disclosure after the value aside) or a fact sentence of the stream."""
    n = 0
    for line in context.splitlines():
        m = KEY_LINE.match(line.strip())
        if m:
            slot, value = (m[1], m[2]), m[3].split(" (", 1)[0]
        elif (c := match_cloze(re.sub(r"^\d+\. ", "", line.strip()).rstrip("."))) is not None:
            slot, value = (entity_slug(c[1]), c[0].relation), c[2]
        else:
            continue
        n += slot in slots and norm(value) in slots[slot][1]
    return n


class RawTopK:
    """Plain RAG over the stream: the ``k`` fact sentences nearest the question by cosine, every version
    of a slot included (what a memory that only appends and searches presents)."""

    def __init__(self, facts: Sequence[str], embedder: Any) -> None:
        from pmem.adapters.service.reader import TokenCounter

        self.facts, self.embedder, self.count = list(facts), embedder, TokenCounter()
        self.matrix = embedder.embed(self.facts)

    def read(self, question: str, k: int = K) -> tuple[str, int]:
        import numpy as np

        scores = self.matrix @ self.embedder.embed([question])[0]
        context = "\n".join(self.facts[int(i)] for i in np.argsort(-scores, kind="stable")[:k])
        return context, self.count(context)


def load_questions(path: Path) -> list[Question]:
    out = []
    for n, line in enumerate(read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            q = json.loads(line)
            tag = str(q.get("source", "")) + str(q.get("qa_pair_id", ""))
            out.append(Question(str(q["question"]), [str(a) for a in q["answers"]], "_mh_" in tag))
        except (ValueError, KeyError, TypeError) as e:
            raise SystemExit(f"{path}:{n}: not a question line (JSON with question, answers, source): {e}") from None
    return out


def load_facts(path: Path) -> list[str]:
    facts = fc_facts(read_text(path))
    if not facts:
        raise SystemExit(f"{path}: no numbered facts ('0. ...') found")
    return facts


def pick(questions: Sequence[Question], per_kind: int | None, kinds: str = "sh,mh") -> list[Question]:
    """The first ``per_kind`` single-hop and multi-hop questions (all with None), of the ``kinds`` asked."""
    singles = [q for q in questions if not q.multi][:per_kind] if "sh" in kinds.split(",") else []
    multis = [q for q in questions if q.multi][:per_kind] if "mh" in kinds.split(",") else []
    return singles + multis


class Answerer:
    """A chat model through litellm at temperature 0, asked with the reader's prompt. With ``replies``, each
    reply is appended to that JSON-lines file as it comes, and a prompt found there is not asked again: a
    rerun (or a run cut short) replays what was answered."""

    def __init__(self, model: str, base: str | None, replies: Path | None = None) -> None:
        self.model = model if "/" in model else f"openai/{model}"
        self.base, self.replies = base, replies
        self.known: dict[str, str] = {}
        if replies is not None and replies.exists():
            for line in read_text(replies).splitlines():
                r = json.loads(line)
                self.known[r["key"]] = r["reply"]

    @classmethod
    def from_arg(cls, reader: str | None, replies: Path | None) -> Answerer | None:
        if reader == "none":
            return None
        base = os.environ.get("PMEM_LLM_BASE")
        model = reader or os.environ.get("PMEM_LLM_MODEL")
        if not model or (reader is None and not base):
            raise SystemExit("--reader: set PMEM_LLM_BASE and PMEM_LLM_MODEL for the local model route, "
                             "name a litellm model, or give --reader none")
        return cls(model, base, replies)

    def __call__(self, question: str, context: str) -> str:
        from pmem.adapters.llm.reader import ANSWER_PROMPT

        prompt = ANSWER_PROMPT.format(context=context, question=question)
        key = hashlib.sha256(f"{self.model}\n{prompt}".encode()).hexdigest()
        if key not in self.known:
            self.known[key] = self._complete(prompt)
            if self.replies is not None:
                with self.replies.open("a") as f:
                    f.write(json.dumps({"key": key, "question": question, "reply": self.known[key]}) + "\n")
        return self.known[key]

    def _complete(self, prompt: str) -> str:
        from pmem.adapters.llm.client import _litellm

        key = os.environ.get("PMEM_LLM_KEY", "x")
        r: Any = _litellm().completion(model=self.model, api_base=self.base, api_key=key, temperature=0,
                                       messages=[{"role": "user", "content": prompt}], max_tokens=32)
        return str(r.choices[0].message.content or "").strip()


def score(store: Any, questions: Sequence[Question], slots: dict[tuple[str, str], tuple[str, set[str]]],
          answer: Callable[[str, str], str] | None, hops: int, asked: int | None,
          raw: RawTopK | None = None) -> dict[str, Tally]:
    """Every question through its read, tallied per arm, the reader answering from each arm's context; the
    same-run baselines beside them: the single-shot read for multi-hop, raw top-k facts (with ``raw``)
    for single-hop."""
    tallies: dict[str, Tally] = {}
    for q in questions:
        arms = {"multi-hop, graph-guided": hops, "multi-hop, single-shot": 0} if q.multi else {"single-hop": 0}
        contexts = {}
        for arm, h in arms.items():
            r = store.read(q.question, k=K, hops=h)
            contexts[arm] = (r.context, r.tokens)
        if raw is not None and not q.multi:
            contexts[f"single-hop, raw top-{K} facts"] = raw.read(q.question)
        for arm, (context, tokens) in contexts.items():
            t = tallies.setdefault(arm, Tally())
            tally(t, q, context, tokens, slots)
            if answer is not None and (asked is None or t.asked < asked):
                reply = answer(q.question, context)
                t.asked += 1
                t.right += contains_gold(reply, q.answers)
                t.answers.append({"question": q.question, "answers": q.answers, "reply": reply})
    return tallies


def tally(t: Tally, q: Question, context: str, tokens: int, slots: dict[tuple[str, str], tuple[str, set[str]]]) -> None:
    t.n += 1
    t.gold += contains_gold(context, q.answers)
    t.tokens += tokens
    t.stale += stale_lines(context, slots) > 0


def run_size(run: Run, label: str, facts: list[str], questions: list[Question], args: argparse.Namespace,
             answer: Callable[[str, str], str] | None) -> dict[str, Any]:
    from benchmarks.multihop import ingest
    from pmem.adapters.embedders.cache import CachedEmbedder
    from pmem.adapters.embedders.onnx_embedder import OnnxEmbedder
    from pmem.adapters.service.store import Store

    lines = [f"{i}. {f}" for i, f in enumerate(facts)]
    with tempfile.TemporaryDirectory() as d, Store(Path(d) / "fc.db", embedder=CachedEmbedder(OnnxEmbedder())) as store:
        seconds = ingest(store, lines)
        store.read("warm-up", k=1, hops=1)  # the vector index and the graph built, untimed
        t0 = time.perf_counter()
        raw = RawTopK(facts, store.embedder) if args.raw and any(not q.multi for q in questions) else None
        tallies = score(store, questions, overridden(facts), answer, args.hops, args.answer, raw)
        read_s = time.perf_counter() - t0
    rows = [{"arm": arm, **t.row()} for arm, t in tallies.items()]
    run.table(rows, f"FactConsolidation {label}: {len(facts):,} facts, ingest {seconds:.1f} s, "
                    f"reads {read_s:.1f} s ({'reader ' + args.reader_name})")
    sh, rag = tallies.get("single-hop"), tallies.get(f"single-hop, raw top-{K} facts")
    if sh and rag:
        run.beside(f"{label} single-hop questions shown a stale value, P-Mem read", sh.stale,
                   f"raw top-{K} facts", rag.stale, "questions")
    base, guided = tallies.get("multi-hop, single-shot"), tallies.get("multi-hop, graph-guided")
    if base and guided:
        run.beside(f"{label} multi-hop gold in context, graph-guided", pct(guided.gold, guided.n),
                   "single-shot read", pct(base.gold, base.n), "%")
        if guided.asked and base.asked:
            run.beside(f"{label} multi-hop answered, graph-guided context", pct(guided.right, guided.asked),
                       "single-shot context", pct(base.right, base.asked), "%")
    return {"facts": len(facts), "ingest_s": round(seconds, 1), "read_s": round(read_s, 1),
            "arms": {arm: {**t.row(), "replies": t.answers} for arm, t in tallies.items()}}


def data_sets(args: argparse.Namespace) -> list[tuple[str, list[str], list[Question]]]:
    if args.context or args.questions:
        if not (args.context and args.questions):
            raise SystemExit("--context and --questions go together")
        return [(args.context.stem, load_facts(args.context), load_questions(args.questions))]
    out = []
    for size in args.size.split(","):
        if size == "6k":
            out.append(("6k", load_facts(FC_DIR / "factconsolidation_6k_context.txt"),
                        load_questions(FC_DIR / "questions_6k.jsonl")))
            continue
        n = SIZES.get(size) or (int(size) if size.isdigit() and int(size) > 0 else None)
        if n is None:
            raise SystemExit(f"--size: unknown size {size!r} (6k, 32k, 64k, 262k or a number of facts)")
        stream = generate(n, seed=args.seed)
        if args.write:
            args.write.mkdir(parents=True, exist_ok=True)
            stream.write(args.write / f"factconsolidation_{size}_seed{args.seed}_context.txt",
                         args.write / f"questions_{size}_seed{args.seed}.jsonl")
        qs = [Question(q["question"], q["answers"], "_mh_" in q["qa_pair_id"]) for q in stream.questions]
        out.append((size, stream.facts, qs))
    return out


def nan_if_none(v: float | None) -> float:
    return float("nan") if v is None else float(v)


def plot(results: dict[str, Any], path: Path) -> Path:
    """Gold in context against stream length, and, where the reader answered, its accuracy beside it."""
    sizes = list(results)
    x = [results[s]["facts"] for s in sizes]
    arms = ("single-hop", "multi-hop, graph-guided", "multi-hop, single-shot")

    def series(key: str) -> dict[str, list[float]]:  # NaN where an arm has no figure: a gap in its line
        out = {a: [nan_if_none(results[s]["arms"].get(a, {}).get(key)) for s in sizes] for a in arms}
        return {a: ys for a, ys in out.items() if any(y == y for y in ys)}

    answered = series("answered %")

    def draw(axes: list[Any]) -> None:
        line_panel(axes[0], x, series("gold in context %"), "facts in the stream", "%",
                   "gold answer in the context", logx=True)
        if answered:
            line_panel(axes[1], x, answered, "facts in the stream", "%", "answered by the reader", logx=True)

    return save_figure(draw, path, panels=2 if answered else 1, suptitle="FactConsolidation through P-Mem")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--context", type=Path, help="a FactConsolidation context file (numbered facts)")
    p.add_argument("--questions", type=Path, help="its questions, JSON lines")
    p.add_argument("--size", default="6k", help="comma-separated: 6k, 32k, 64k, 262k or a number of facts")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated streams")
    p.add_argument("--write", type=Path, help="write the generated streams and questions into this folder")
    p.add_argument("--reader", help="none, or a litellm model (default: PMEM_LLM_MODEL at PMEM_LLM_BASE)")
    p.add_argument("--hops", type=int, default=3, help="the least number of hops of a multi-hop read")
    p.add_argument("--questions-per-kind", type=int, help="the first N single-hop and N multi-hop questions")
    p.add_argument("--kinds", default="sh,mh", choices=("sh,mh", "sh", "mh"), help="single-hop, multi-hop or both")
    p.add_argument("--answer", type=int, help="the reader answers only the first N questions of each kind")
    p.add_argument("--raw", action="store_true", help=f"also raw top-{K} fact sentences (plain RAG) for single-hop")
    p.add_argument("--replies", type=Path, help="JSON lines of the reader's replies: kept as they come, replayed")
    add_output_options(p, "factconsolidation")
    args = p.parse_args(argv)
    answer = Answerer.from_arg(args.reader, args.replies)
    args.reader_name = "none" if answer is None else answer.model
    run = Run("factconsolidation", args.results)
    run.figures["published_best_memory_system"] = PUBLISHED
    results = {}
    for label, facts, questions in data_sets(args):
        results[label] = run_size(run, label, facts, pick(questions, args.questions_per_kind, args.kinds), args, answer)
    run.figures.update({"reader": args.reader_name, "hops": args.hops, "seed": args.seed, "sizes": results})
    if len(results) > 1:
        print(f"plot: {plot(results, args.plots / 'factconsolidation.png')}", file=sys.stderr)
    run.finish()


if __name__ == "__main__":
    main()
