"""Mem0 beside P-Mem on one machine, in one process: FactConsolidation and HaluMem's update stage.

Mem0 (``mem0ai``, the release ``setup.sh`` pins) runs offline: every fact or memory point is one
``Memory.add(text, infer=False)`` (kept verbatim, no LLM), into a FAISS store (cosine), embedded by P-Mem's
own ONNX MiniLM (wrapped as Mem0's embedding model); a question is one ``Memory.search(q, top_k=12,
threshold=0)``, and its context is the memories returned, in rank order, one a line.

P-Mem's figures come from its own harness in the same run: ``benchmarks.factconsolidation.run_size``
(template ingest, ``read(k=12)``, graph-guided multi-hop) and ``benchmarks.halumem.run_user`` (template
extractor, ``read(mode="cells", k=12)``). Both sides are scored by the same functions:

- FactConsolidation (``--size 6k,32k``; 6k is the shared file, larger sizes the generated streams of
  ``benchmarks.fc_streams``, seed 0): ingest seconds; gold in context (``factconsolidation.tally``);
  questions shown any overridden value (the harness's ``stale presented``); and, for single-hop questions
  whose slot was overwritten (``validity_fc.question_slot``), the question's own superseded value shown, and
  shown above the gold (:func:`slot_ranks`). P-Mem's contexts are taken from its reader hook (a reader that
  only records; its own table, which would show that reader's empty answers, is not printed).
- HaluMem (``--halumem-user FILE``, the gold memory points, all sessions): ingest seconds; every update
  point's context classified by ``halumem.classify`` (correct / omission / hallucination: a line shows the
  original value); the new value in context (:func:`new_in_context`); QA answers in context
  (``extraction.holds``). P-Mem's update contexts are taken from its judge hook (a judge that only records).

    bash benchmarks/peers/setup.sh
    .venv-peers/bin/python -m benchmarks.peers.mem0_peer --size 6k
    .venv-peers/bin/python -m benchmarks.peers.mem0_peer --size 32k
    .venv-peers/bin/python -m benchmarks.peers.mem0_peer --halumem-user ../shared/data/halumem/pilot_slice_user0.jsonl
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, cast

from benchmarks.extraction import holds
from benchmarks.factconsolidation import K, Question, Tally, data_sets, load_facts, load_questions, overridden, pct
from benchmarks.factconsolidation import run_size as pmem_fc_run
from benchmarks.factconsolidation import tally as fc_tally
from benchmarks.halumem import (
    BOUNDARY,
    UPDATE_JUDGE_PROMPT,
    classify,
    load_user,
    persona_name,
    update_values,
    writer_points,
)
from benchmarks.halumem import run_user as pmem_halumem_run
from benchmarks.harness import SHARED_DATA, Run, add_output_options, percentile
from benchmarks.validity_fc import question_slot, slot_chains
from benchmarks.validity_probes import has, norm

MEM0 = "mem0ai"
NAME = "peers_mem0"


# -- scoring shared by both sides (pure) ---------------------------------------------------------------------------
def slot_ranks(lines: Sequence[str], subject: str, olds: Sequence[str],
               golds: Sequence[str]) -> tuple[int | None, int | None]:
    """(rank of the first line that names ``subject`` with one of its superseded values ``olds``, rank of the
    first line holding a gold answer), 0-based, None where no line does. A superseded value equal to a gold
    answer is not stale."""
    stale = [v for v in olds if all(norm(v) != norm(g) for g in golds)]
    first_stale = next((i for i, ln in enumerate(lines) if has(ln, subject) and any(has(ln, v) for v in stale)),
                       None)
    first_gold = next((i for i, ln in enumerate(lines) if any(has(ln, g) for g in golds)), None)
    return first_stale, first_gold


def stale_above_gold(ranks: tuple[int | None, int | None]) -> bool:
    """The superseded value ranks above the gold one (or is shown and the gold is not)."""
    first_stale, first_gold = ranks
    return first_stale is not None and (first_gold is None or first_stale < first_gold)


def new_in_context(context: str, new: str) -> bool:
    """HaluMem: the context holds the update's new value (``classify`` with no old value to find)."""
    return classify(context, "", new) == "correct"


def without_line(context: str, text: str) -> str:
    """``context`` less the lines that are ``text`` itself (a HaluMem update point read back verbatim)."""
    return "\n".join(ln for ln in context.splitlines() if norm(ln) != norm(text))


def judge_context(prompt: str) -> str:
    """The context inside a prompt built from ``halumem.UPDATE_JUDGE_PROMPT``."""
    head, tail = UPDATE_JUDGE_PROMPT.split("{context}", 1)
    body = prompt[len(head):] if prompt.startswith(head) else prompt
    end = tail.split("{", 1)[0]
    return body[:body.index(end)] if end and end in body else body


@dataclass
class OwnSlot:
    """Single-hop questions whose slot was overwritten: the question's own superseded value in the context."""

    questions: int = 0
    shown: int = 0
    above_gold: int = 0

    def add(self, lines: Sequence[str], slot: tuple[str, list[str]] | None, golds: Sequence[str]) -> None:
        if slot is None or not [v for v in slot[1] if all(norm(v) != norm(g) for g in golds)]:
            return
        ranks = slot_ranks(lines, slot[0], slot[1], golds)
        self.questions += 1
        self.shown += ranks[0] is not None
        self.above_gold += stale_above_gold(ranks)


@dataclass
class Side:
    """One system's figures on one data set."""

    ingest_s: float = 0.0
    items: int = 0
    ready_s: float = 0.0  # ingest until the first search can be answered (index built)
    search_s: list[float] = field(default_factory=list)
    tallies: dict[str, Tally] = field(default_factory=dict)
    own: OwnSlot = field(default_factory=OwnSlot)

    def rows(self, system: str) -> list[dict[str, Any]]:
        out = []
        for arm, t in self.tallies.items():
            row: dict[str, Any] = {"system": system, "arm": arm, "questions": t.n,
                                   "gold in top-k %": pct(t.gold, t.n), "shown any overridden value": t.stale,
                                   "tokens": round(t.tokens / max(1, t.n), 1)}
            if arm == "single-hop":
                row |= {"overwritten-slot questions": self.own.questions, "own old value shown": self.own.shown,
                        "old above gold": self.own.above_gold}
            out.append(row)
        return out


# -- Mem0, offline --------------------------------------------------------------------------------------------------
def mem0_memory(workdir: Path, embedder: Any) -> Any:
    """A Mem0 ``Memory``: FAISS (cosine) under ``workdir``, P-Mem's MiniLM as its embedding model, no telemetry.
    The LLM and embedder configured are placeholders Mem0 needs to start; ``infer=False`` never calls the LLM
    and the embedder is replaced before any call."""
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ.setdefault("MEM0_DIR", str(workdir / "mem0home"))
    from mem0 import Memory  # type: ignore[import-not-found, unused-ignore]
    from mem0.embeddings.base import EmbeddingBase  # type: ignore[import-not-found, unused-ignore]

    class MiniLM(EmbeddingBase):  # type: ignore[misc, unused-ignore]
        def embed(self, text: str, memory_action: str | None = None) -> list[float]:
            return list(map(float, embedder.embed([text])[0].tolist()))

        def embed_batch(self, texts: Sequence[str], memory_action: str = "add") -> list[list[float]]:
            return [list(map(float, v)) for v in embedder.embed(list(texts)).tolist()]

    memory = Memory.from_config({
        "vector_store": {"provider": "faiss", "config": {
            "path": str(workdir / "faiss"), "distance_strategy": "cosine", "embedding_model_dims": embedder.dim}},
        "embedder": {"provider": "openai", "config": {"api_key": "unused-offline", "embedding_dims": embedder.dim}},
        "llm": {"provider": "openai", "config": {"api_key": "unused-offline"}},
        "history_db_path": str(workdir / "history.db"),
    })
    memory.embedding_model = MiniLM()
    return memory


class Mem0Side:
    def __init__(self, workdir: Path, embedder: Any, user: str) -> None:
        self.memory, self.user = mem0_memory(workdir, embedder), user
        self.search_s: list[float] = []

    def add(self, texts: Sequence[str]) -> float:
        t0 = time.perf_counter()
        for text in texts:
            self.memory.add(text, user_id=self.user, infer=False)
        return time.perf_counter() - t0

    def search(self, query: str) -> list[str]:
        t0 = time.perf_counter()
        r = self.memory.search(query, top_k=K, filters={"user_id": self.user}, threshold=0.0)
        self.search_s.append(time.perf_counter() - t0)
        return [str(m["memory"]) for m in r["results"]]


# -- FactConsolidation ----------------------------------------------------------------------------------------------
def fc_questions(args: argparse.Namespace, size: str) -> tuple[list[str], list[Question]]:
    if size == "6k":
        d = args.data / "factconsolidation"
        return load_facts(d / "factconsolidation_6k_context.txt"), load_questions(d / "questions_6k.jsonl")
    ns = argparse.Namespace(context=None, questions=None, size=size, seed=args.seed, write=None)
    [(_, facts, questions)] = data_sets(ns)
    return facts, questions


def pmem_fc(facts: list[str], questions: list[Question], chains: dict[tuple[str, str], list[str]],
            count: Callable[[str], int]) -> Side:
    """P-Mem through ``factconsolidation.run_size``; its single-hop contexts recorded by its reader hook."""
    seen: dict[str, list[str]] = {}

    def record(question: str, context: str) -> str:
        seen.setdefault(question, []).append(context)
        return ""

    ns = argparse.Namespace(hops=3, answer=None, raw=False, reader_name="none")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d, contextlib.redirect_stdout(io.StringIO()):
        out = pmem_fc_run(Run("pmem", Path(d)), "pmem", facts, questions, ns, record)
    # run_size times the template ingest alone; embedding and the graph are built at its first (untimed) read.
    # Everything but the timed reads is what compares with Mem0's ingest, which embeds each fact as it adds it.
    side = Side(ingest_s=out["ingest_s"], items=len(facts), ready_s=time.perf_counter() - t0 - out["read_s"])
    side.search_s = [out["read_s"] / max(1, len(questions))]
    for arm, row in out["arms"].items():
        n = row["questions"]
        side.tallies[arm] = Tally(n=n, gold=round(row["gold in context %"] * n / 100), stale=row["stale presented"],
                                  tokens=round(row["tokens"] * n))
    for q in questions:
        if not q.multi:
            side.own.add(seen[q.question][0].splitlines(), question_slot(q.question, q.answers, chains), q.answers)
    return side


def mem0_fc(mem0: Mem0Side, facts: list[str], questions: list[Question],
            chains: dict[tuple[str, str], list[str]], count: Callable[[str], int]) -> Side:
    side = Side(ingest_s=mem0.add(facts), items=len(facts))
    side.ready_s = side.ingest_s
    slots = overridden(facts)
    for q in questions:
        lines = mem0.search(q.question)
        context = "\n".join(lines)
        fc_tally(side.tallies.setdefault("multi-hop" if q.multi else "single-hop", Tally()), q, context,
                 count(context), slots)
        if not q.multi:
            side.own.add(lines, question_slot(q.question, q.answers, chains), q.answers)
    side.search_s = mem0.search_s
    return side


def run_fc(run: Run, args: argparse.Namespace, size: str, embedder: Any, count: Callable[[str], int]) -> dict[str, Any]:
    facts, questions = fc_questions(args, size)
    chains = slot_chains(facts)
    pm = pmem_fc(facts, questions, chains, count)
    with tempfile.TemporaryDirectory() as d:
        m0 = mem0_fc(Mem0Side(Path(d), embedder, "fc"), facts, questions, chains, count)
    rows = pm.rows("P-Mem") + m0.rows("Mem0")
    run.table(rows, f"FactConsolidation {size}: {len(facts):,} facts, {len(questions)} questions, top {K}; ingest "
                    f"P-Mem {pm.ingest_s:.1f} s ({pm.ready_s:.1f} s with its index built), Mem0 {m0.ingest_s:.1f} s "
                    f"({len(facts) / m0.ingest_s:.0f} facts/s); "
                    f"Mem0 search p50 {1000 * statistics.median(m0.search_s):.1f} ms")
    run.beside(f"{size} ingest with the index built, P-Mem", round(pm.ready_s, 1), "Mem0", round(m0.ingest_s, 1), "s")
    for arm in ("single-hop",):
        run.beside(f"{size} {arm} shown own old value, P-Mem", pm.own.shown, "Mem0", m0.own.shown, "questions")
        run.beside(f"{size} {arm} gold in top-{K}, P-Mem", pct(pm.tallies[arm].gold, pm.tallies[arm].n),
                   "Mem0", pct(m0.tallies[arm].gold, m0.tallies[arm].n), "%")
    return {"facts": len(facts), "questions": len(questions),
            "pmem": {"ingest_s": pm.ingest_s, "ingest_and_index_s": round(pm.ready_s, 1),
                     "read_ms_mean": round(1000 * pm.search_s[0], 1), "rows": pm.rows("P-Mem")},
            "mem0": {"ingest_s": round(m0.ingest_s, 1), "facts_per_s": round(len(facts) / m0.ingest_s, 1),
                     "search_p50_ms": round(1000 * statistics.median(m0.search_s), 1),
                     "search_p99_ms": round(1000 * percentile(m0.search_s, 99), 1), "rows": m0.rows("Mem0")}}


# -- HaluMem --------------------------------------------------------------------------------------------------------
def update_points(session: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """The session's update points, as ``halumem.run_user`` scores them."""
    for p in session["memory_points"]:
        if p.get("is_update") == "True" and p.get("memory_source") != "interference":
            yield p


def update_figures(contexts: Sequence[str], points: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    verdicts = {"correct": 0, "omission": 0, "hallucination": 0}
    new = own = 0
    for context, p in zip(contexts, points, strict=True):
        old, value, attribute = update_values(p["memory_content"], list(p.get("original_memories") or []))
        verdicts[classify(context, old, value, attribute)] += 1
        new += new_in_context(context, value)
        own += classify(without_line(context, p["memory_content"]), old, value, attribute) == "hallucination"
    return {"update points": len(points), **verdicts, "hallucination, the point's own line left out": own,
            "new value in top-k": new}


def qa_figure(flags: Sequence[bool | None]) -> dict[str, Any]:
    asked = [f for f in flags if f is not None]
    return {"questions (boundary left out)": len(asked), "answer in top-k": sum(asked)}


def run_halumem(run: Run, path: Path, embedder: Any) -> dict[str, Any]:
    from pmem.domain.extraction.template import TemplateExtractor

    user = load_user(path)
    sessions = list(range(1, len(user["sessions"]) + 1))
    points = [p for s in user["sessions"] for p in update_points(s)]
    # P-Mem through halumem.run_user; the judge hook records each update point's context and answers nothing.
    prompts: list[str] = []

    def record(prompt: str, max_tokens: int) -> str:
        prompts.append(prompt)
        return ""

    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        rows = list(pmem_halumem_run(user, sessions, TemplateExtractor(), None, "points", None,
                                     cast(Any, record), Path(d) / "h.db"))
        pmem_s = time.perf_counter() - t0
    pm = update_figures([judge_context(p) for p in prompts], points)
    pm_qa = qa_figure([r["in_context"] for r in rows if r["stage"] == "qa"])
    # Mem0: the same points written in the same order, read after each session.
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        mem0 = Mem0Side(Path(d), embedder, "halumem")
        contexts, flags, ingest_s, written = [], [], 0.0, 0
        for s in user["sessions"]:
            texts = [p["memory_content"] for p in writer_points(s["memory_points"])]
            ingest_s += mem0.add(texts)
            written += len(texts)
            contexts += ["\n".join(mem0.search(p["memory_content"])) for p in update_points(s)]
            for q in s.get("questions", []):
                flags.append(None if q.get("question_type") == BOUNDARY
                             else holds("\n".join(mem0.search(q["question"])), str(q["answer"])))
        mem0_s = time.perf_counter() - t0
    m0, m0_qa = update_figures(contexts, points), qa_figure(flags)
    rows_out = [{"system": "P-Mem (template)", "ingest + reads s": round(pmem_s, 1), **pm, **pm_qa},
                {"system": "Mem0 (infer=False)", "ingest + reads s": round(mem0_s, 1), **m0, **m0_qa}]
    run.table(rows_out, f"HaluMem {persona_name(user)} ({path.name}): {written} gold memory points, "
                        f"{len(sessions)} sessions, top {K}; hallucination = a line shows the original value")
    run.beside(f"HaluMem {path.stem} update points showing the original value, P-Mem", pm["hallucination"],
               "Mem0", m0["hallucination"], "points")
    mem0_figures = {"ingest_s": round(ingest_s, 1), "ingest_and_reads_s": round(mem0_s, 1),
                    "points_per_s": round(written / ingest_s, 1),
                    "search_p50_ms": round(1000 * statistics.median(mem0.search_s), 1), **m0, **m0_qa}
    return {"points_written": written, "sessions": len(sessions),
            "pmem": {"ingest_and_reads_s": round(pmem_s, 1), **pm, **pm_qa}, "mem0": mem0_figures}


# -- main -----------------------------------------------------------------------------------------------------------
def mem0_version() -> str:
    try:
        return version(MEM0)
    except PackageNotFoundError:
        raise SystemExit(f"{MEM0} is not installed here: run bash benchmarks/peers/setup.sh and use "
                         ".venv-peers/bin/python") from None


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", help="FactConsolidation, comma-separated: 6k (the shared file), 32k, 64k, 262k or a "
                                  "number of facts (generated)")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated streams")
    p.add_argument("--halumem-user", type=Path, action="append", default=[],
                   help="a HaluMem user file (JSON lines, first user); a bare name is looked for under DATA/halumem")
    p.add_argument("--data", type=Path, default=SHARED_DATA, help=f"the shared data folder (default {SHARED_DATA})")
    add_output_options(p, NAME)
    args = p.parse_args(argv)
    if not args.size and not args.halumem_user:
        args.size = "6k"
    from pmem.adapters.embedders.onnx_embedder import OnnxEmbedder
    from pmem.adapters.service.reader import TokenCounter

    run = Run(NAME, args.results)
    embedder, count = OnnxEmbedder(), TokenCounter()
    run.figures |= {"mem0ai": mem0_version(), "k": K, "embedder": "P-Mem's ONNX MiniLM (both sides)",
                    "mem0_config": "infer=False, FAISS cosine, threshold 0, one add per fact"}
    if args.size:
        run.figures["factconsolidation"] = {size: run_fc(run, args, size, embedder, count)
                                            for size in args.size.split(",")}
    users = {}
    for path in args.halumem_user:
        path = path if path.exists() else args.data / "halumem" / path.name
        users[path.stem] = run_halumem(run, path, embedder)
    if users:
        run.figures["halumem"] = users
    run.finish()


if __name__ == "__main__":
    main()
