"""LoCoMo question answering through P-Mem, beside plain RAG and the full conversation, with the same reader.

Ingests one LoCoMo conversation (``--conversation FILE``, sample ``--sample``, ``--sessions``) with the LLM
extractor (``--extractor MODEL``; ``none``: the dialogue template extractor, which records every turn but
writes almost no cells), then answers the questions of categories 1-4 (multi-hop, temporal, open-domain,
single-hop) whose evidence lies in the ingested sessions, from four contexts:

- P-Mem cells: ``read(question, mode="cells", dated=True)``, the top 12 cells, each after its date;
- P-Mem turns: ``read(question, mode="turns")``, the top 12 turns, superseded ones pruned;
- raw top-k turns (plain RAG): the 12 turns nearest the question by the same embedder;
- the full conversation, when its prompt fits the reader's window (``--window``, tokens counted with the
  store's MiniLM tokenizer: an estimate of the reader's own count).

Per context and category it reports whether the context holds the answer (at least half of the gold answer's
content words: no model), and with a reader (``--reader MODEL``) the token F1 of LoCoMo's evaluation
(normalised tokens; multi-hop answers split on commas; LoCoMo's Porter stemming is left out) and the accuracy
a judge model (``--judge``, by default the reader) grants. ``--reader none`` gives the evidence figures alone.

Every model call (extractor, reader, judge) is answered from the recorded answers (``--answers``, by default
every ``benchmarks/data/locomo_answers_*.jsonl``) when it is there, else asked and appended to ``--record``, so
a rerun replays in seconds; ``--offline`` stops at the first call that is not recorded.

    .venv/bin/python -m benchmarks.locomo --sessions 1-8 --questions 5 \\
        [--conversation ../shared/data/locomo/locomo_conv0-4.json] [--reader openai/qwen|none] \\
        [--extractor openai/qwen|none] [--base http://127.0.0.1:8080/v1] [--offline]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import string
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pmem
from benchmarks.extraction import NotRecorded, Tape, holds
from benchmarks.harness import DATA, SHARED_DATA, Run, add_output_options, read_text, save_figure
from pmem.adapters.llm.client import LlmSettings, _litellm
from pmem.adapters.llm.reader import ANSWER_PROMPT
from pmem.adapters.service.ingest import Ingestor, make_identity
from pmem.adapters.service.reader import SHARED_COUNTER
from pmem.adapters.sources.locomo import locomo_records
from pmem.adapters.sources.record import Record
from pmem.domain.extraction.template import DialogueTemplateExtractor
from pmem.projections.reading import render_turn

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
ARMS = ("P-Mem cells", "P-Mem turns (pruned)", "raw top-k turns (RAG)", "full conversation")
K = 12
DEFAULT_CONVERSATION = SHARED_DATA / "locomo" / "locomo_conv0-4.json"
DEFAULT_RECORD = DATA / "locomo_answers_reader.jsonl"

JUDGE_PROMPT = (
    "You grade an answer to a question about a conversation against the gold answer. The answer is CORRECT "
    "when it says the same thing as the gold answer, in any wording (a date in another format, a shorter or "
    "longer phrase naming the same thing); it is WRONG when it names something else, misses it, or says it "
    "does not know while the gold answer gives one. When the gold answer says the information is not given, "
    "an answer saying it is unknown is CORRECT. Reply with one word: CORRECT or WRONG.\n\n"
    "Question: {question}\nGold answer: {gold}\nAnswer: {answer}\nGrade:")


# -- the LoCoMo paper's metric -------------------------------------------------------------------------------
def normalize_answer(text: str) -> str:
    """LoCoMo's normalisation: lower case, commas and punctuation out, the words a, an, the and and out."""
    text = text.replace(",", "").lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    return " ".join(re.sub(r"\b(a|an|the|and)\b", " ", text).split())


def token_f1(prediction: str, gold: str) -> float:
    """F1 of the normalised tokens of ``prediction`` against ``gold`` (0 when either has none in common)."""
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    same = sum((Counter(pred) & Counter(ref)).values())
    if not same:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def locomo_f1(prediction: str, gold: str, category: int) -> float:
    """The F1 LoCoMo scores a category with: multi-hop answers are lists (each gold part takes its best
    predicted part, then the mean); an open-domain gold answer keeps its first alternative (before ``;``)."""
    if category == 1:
        preds = [p for p in prediction.split(",") if p.strip()] or [prediction]
        golds = [g for g in gold.split(",") if g.strip()] or [gold]
        return sum(max(token_f1(p, g) for p in preds) for g in golds) / len(golds)
    if category == 3:
        gold = gold.split(";")[0].strip()
    return token_f1(prediction, gold)


# -- model calls ------------------------------------------------------------------------------------------------
@dataclass
class Chat:
    """A short completion from any litellm model (``api_base`` for an OpenAI-compatible server), temperature 0."""

    model: str
    base: str | None = None
    max_tokens: int = 32

    def __call__(self, prompt: str, max_tokens: int | None = None) -> str:
        kwargs: dict[str, Any] = {"model": self.model, "messages": [{"role": "user", "content": prompt}],
                                  "temperature": 0, "max_tokens": max_tokens or self.max_tokens, "max_retries": 0}
        if self.base:
            kwargs |= {"api_base": self.base, "api_key": os.environ.get("PMEM_LLM_KEY", "none")}
        try:
            r: Any = _litellm().completion(**kwargs)
        except Exception as e:  # noqa: BLE001 - litellm raises many kinds; the run stops with one line
            first = str(e).splitlines()[0][:160] if str(e) else type(e).__name__
            raise SystemExit(f"model {self.model} at {self.base or 'its default route'} did not answer ({first}): "
                             "start one (scripts/local-llm.sh), give --base, or use --reader none") from None
        return str(r.choices[0].message.content or "").strip().strip("`").strip()


def read_grade(reply: str) -> bool | None:
    """The judge's grade: True (CORRECT), False (WRONG), None when the reply says neither."""
    words = set(re.findall(r"[A-Z]+", reply.upper()))
    if ("CORRECT" in words) == ("WRONG" in words):
        return None
    return "CORRECT" in words


def answer(reader: Chat, question: str, context: str) -> str:
    """The reader's answer, asked with P-Mem's own reader prompt."""
    return reader(ANSWER_PROMPT.format(context=context, question=question))


def grade(judge: Chat, question: str, gold: str, reply: str) -> bool | None:
    return read_grade(judge(JUDGE_PROMPT.format(question=question, gold=gold, answer=reply), 4))


def install_tape(answers: Sequence[Path], record: Path | None, offline: bool) -> Tape:
    """Answers every model call from ``answers`` where recorded; the rest go to the model and are appended to
    ``record`` (``offline``: a call not recorded stops the run instead)."""
    sources = [p for p in dict.fromkeys([*answers, *([record] if record else [])]) if p.exists()]
    if offline:
        return Tape(None, sources, cache=True)
    assert record is not None
    record.parent.mkdir(parents=True, exist_ok=True)
    record.touch()
    return Tape(record, sources, cache=True)


def model_or_none(value: str) -> str | None:
    return None if value.strip().lower() == "none" else value.strip()


# -- the conversation -----------------------------------------------------------------------------------------
def parse_sessions(text: str) -> set[int] | None:
    """``"1-8"``, ``"1,3,5"`` or ``"all"`` (None)."""
    if text.strip().lower() == "all":
        return None
    out: set[int] = set()
    for part in text.split(","):
        a, _, b = part.strip().partition("-")
        if not a.isdigit() or (b and not b.isdigit()):
            raise SystemExit(f"--sessions: {part!r} is not a session number or range (e.g. 1-8 or 1,3,5)")
        out.update(range(int(a), int(b or a) + 1))
    return out


def select(path: Path, sample: int, sessions: set[int] | None) -> dict[str, Any]:
    """Sample ``sample`` of a LoCoMo file with only ``sessions`` (all when None)."""
    samples = json.loads(read_text(path))
    samples = samples if isinstance(samples, list) else [samples]
    if not 0 <= sample < len(samples):
        raise SystemExit(f"--sample {sample}: {path} holds samples 0 to {len(samples) - 1}")
    s = samples[sample]
    conv = {k: v for k, v in s["conversation"].items()
            if sessions is None or not (m := re.fullmatch(r"session_(\d+)(?:_date_time)?", k)) or int(m[1]) in sessions}
    return {**s, "conversation": conv}


def questions(sample: dict[str, Any], per_category: int | None) -> list[dict[str, Any]]:
    """Questions of categories 1-4 whose evidence turns were all ingested, the first ``per_category`` of each."""
    kept = {t["dia_id"] for k, v in sample["conversation"].items() if re.fullmatch(r"session_\d+", k) for t in v}
    out, seen = [], Counter[int]()
    for q in sample["qa"]:
        c = q.get("category")
        if c in CATEGORIES and q.get("evidence") and all(e in kept for e in q["evidence"]):
            if per_category is None or seen[c] < per_category:
                out.append(q)
                seen[c] += 1
    return out


def ingest(sample: dict[str, Any], extractor: Any, db: Path) -> tuple[pmem.Store, list[Record]]:
    """The conversation written through P-Mem's ingest (soft key identity on, its rule-based judge)."""
    records = locomo_records(json.dumps(sample).encode())
    store = pmem.open(str(db))
    identity = make_identity(store, "auto", extractor.name, None, 0.72)
    list(Ingestor(store, extractor, source="locomo", identity=identity).run(records))
    return store, records


class Contexts:
    """The four contexts of a question over one ingested conversation."""

    def __init__(self, store: pmem.Store, records: list[Record], window: int) -> None:
        import numpy as np

        self.store, self.np = store, np
        self.turns = [render_turn(r.text or "", r.source, r.observed_at) for r in records if r.text]
        self.vectors = store.embedder.embed(self.turns)
        self.full = "\n".join(self.turns)
        self.full_tokens = SHARED_COUNTER(ANSWER_PROMPT.format(context=self.full, question=""))
        self.window = window

    def fits(self) -> bool:
        return self.full_tokens + 64 <= self.window  # room for the question and a short answer

    def __call__(self, question: str) -> dict[str, str]:
        q = self.store.embedder.embed([question])[0]
        top = self.np.argsort(-(self.vectors @ q), kind="stable")[:K]
        out = {ARMS[0]: self.store.read(question, mode="cells", k=K, dated=True).context,
               ARMS[1]: self.store.read(question, mode="turns", k=K).context,
               ARMS[2]: "\n".join(self.turns[int(i)] for i in sorted(top))}
        if self.fits():
            out[ARMS[3]] = self.full
        return out


# -- scoring ----------------------------------------------------------------------------------------------------
def score_question(q: dict[str, Any], contexts: dict[str, str], reader: Chat | None,
                   judge: Chat | None) -> list[dict[str, Any]]:
    """One row per context: whether it holds the answer, its tokens, and (with a reader) the answer, its F1
    and its grade."""
    gold = str(q["answer"])
    rows = []
    for arm, ctx in contexts.items():
        row: dict[str, Any] = {"arm": arm, "category": CATEGORIES[q["category"]], "question": q["question"],
                               "gold": gold, "in_context": holds(ctx, gold), "tokens": SHARED_COUNTER(ctx)}
        if reader is not None:
            row["answer"] = answer(reader, q["question"], ctx)
            row["f1"] = locomo_f1(row["answer"], gold, q["category"])
            row["judged"] = None if judge is None else grade(judge, q["question"], gold, row["answer"])
        rows.append(row)
    return rows


def mean(values: Iterable[float | bool | None]) -> float | None:
    got = [float(v) for v in values if v is not None]
    return sum(got) / len(got) if got else None


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per arm and category (and ``all``): questions, share with the answer in context, F1, judged, tokens."""
    out = []
    for arm in dict.fromkeys(r["arm"] for r in rows):
        for cat in [*CATEGORIES.values(), "all"]:
            mine = [r for r in rows if r["arm"] == arm and cat in (r["category"], "all")]
            if mine:
                out.append({"arm": arm, "category": cat, "questions": len(mine),
                            "answer in context": mean(r["in_context"] for r in mine),
                            "F1": mean(r.get("f1") for r in mine), "judged": mean(r.get("judged") for r in mine),
                            "mean tokens": mean(r["tokens"] for r in mine)})
    return out


def beats_rag(table: list[dict[str, Any]], metric: str) -> dict[str, bool | None]:
    """Per category: whether the best P-Mem arm scores above plain RAG on ``metric`` (None without figures)."""
    out: dict[str, bool | None] = {}
    for cat in CATEGORIES.values():
        by = {r["arm"]: r[metric] for r in table if r["category"] == cat}
        best = max((v for a, v in by.items() if a.startswith("P-Mem") and v is not None), default=None)
        rag = by.get(ARMS[2])
        out[cat] = None if best is None or rag is None else best > rag
    return out


def plot(table: list[dict[str, Any]], metric: str, path: Path) -> None:
    cats = [c for c in CATEGORIES.values() if any(r["category"] == c for r in table)]
    series = {arm: [next((r[metric] or 0.0 for r in table if r["arm"] == arm and r["category"] == c), 0.0)
                    for c in cats] for arm in dict.fromkeys(r["arm"] for r in table)}

    def draw(axes: list[Any]) -> None:
        from benchmarks.harness import bar_panel

        bar_panel(axes[0], cats, series, metric, f"LoCoMo: {metric} per category")
    save_figure(draw, path)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--conversation", type=Path, default=DEFAULT_CONVERSATION, help="a LoCoMo JSON file")
    p.add_argument("--sample", type=int, default=0, help="which conversation of the file (default 0)")
    p.add_argument("--sessions", default="all", help="sessions ingested: all, 1-8, 1,3,5 (default all)")
    p.add_argument("--questions", type=int, help="at most N questions per category (default all)")
    p.add_argument("--extractor", default=os.environ.get("PMEM_LLM_MODEL", "openai/qwen"), help="MODEL or none")
    p.add_argument("--reader", default=os.environ.get("PMEM_LLM_MODEL", "openai/qwen"), help="MODEL or none")
    p.add_argument("--judge", help="MODEL or none (default: the reader)")
    p.add_argument("--base", default=os.environ.get("PMEM_LLM_BASE", "http://127.0.0.1:8080/v1"),
                   help="OpenAI-compatible /v1 URL for the models (empty: litellm's own routing)")
    p.add_argument("--window", type=int, default=4096, help="the reader's context window in tokens (default 4096)")
    p.add_argument("--answers", type=Path, action="append",
                   help="recorded model answers (default: every benchmarks/data/locomo_answers_*.jsonl)")
    p.add_argument("--record", type=Path, default=DEFAULT_RECORD,
                   help=f"new answers go here (default {DEFAULT_RECORD})")
    p.add_argument("--offline", action="store_true", help="never ask a model: a call not recorded stops the run")
    add_output_options(p, "locomo")
    a = p.parse_args(argv)
    tape = install_tape(a.answers or sorted(DATA.glob("locomo_answers_*.jsonl")), a.record, a.offline)
    base = a.base or None
    extractor_model, reader_model = model_or_none(a.extractor), model_or_none(a.reader)
    judge_model = model_or_none(a.judge) if a.judge else reader_model
    sample = select(a.conversation, a.sample, parse_sessions(a.sessions))
    asked = questions(sample, a.questions)
    if not asked:
        raise SystemExit(f"{a.conversation}: no question of categories 1-4 has its evidence in sessions {a.sessions}")
    extractor: Any = DialogueTemplateExtractor()
    if extractor_model:
        from pmem.adapters.llm.extractor import LlmExtractor

        extractor = LlmExtractor(LlmSettings(extractor_model, base, timeout_s=600, attempts=2))
    reader = Chat(reader_model, base) if reader_model else None
    judge = Chat(judge_model, base) if judge_model and reader else None
    run = Run("locomo", a.results)
    with tempfile.TemporaryDirectory() as tmp:
        store, records = ingest(sample, extractor, Path(tmp) / "locomo.db")
        contexts = Contexts(store, records, a.window)
        rows = [row for q in asked for row in score_question(q, contexts(q["question"]), reader, judge)]
        store.close()
    report(run, a, sample, records, contexts, rows, tape, extractor_model, reader_model, judge_model)


def report(run: Run, a: argparse.Namespace, sample: dict[str, Any], records: list[Record], contexts: Contexts,
           rows: list[dict[str, Any]], tape: Tape, extractor: str | None, reader: str | None,
           judge: str | None) -> None:
    table = summary(rows)
    sessions = sorted(int(k.split("_")[1]) for k in sample["conversation"] if re.fullmatch(r"session_\d+", k))
    title = (f"LoCoMo {sample.get('sample_id', a.sample)}, sessions {sessions[0]}-{sessions[-1]} "
             f"({len(records)} turns), extractor {extractor or 'template (none)'}, reader {reader or 'none'}, "
             f"judge {judge or 'none'}")
    run.table(table, title)
    if not contexts.fits():
        print(f"full conversation: {contexts.full_tokens} tokens does not fit the reader's window of {a.window}\n")
    goals = {"best_pmem_beats_rag_answer_in_context": beats_rag(table, "answer in context")}
    if reader:
        goals["best_pmem_beats_rag_f1"] = beats_rag(table, "F1")
    run.figures |= {"conversation": str(a.conversation), "sample": sample.get("sample_id", a.sample),
                    "sessions": sessions, "turns": len(records), "extractor": extractor, "reader": reader,
                    "judge": judge, "k": K, "full_conversation_tokens": contexts.full_tokens, "window": a.window,
                    "model_calls_asked": tape.asked, "table": table, "goals": goals, "per_question": rows}
    try:
        plot(table, "F1" if reader else "answer in context", a.plots / "locomo.png")
    except SystemExit as e:  # matplotlib missing: the figures stand without the plot
        print(e)
    run.finish()


if __name__ == "__main__":
    try:
        main()
    except NotRecorded as e:
        sys.exit(f"error: {e}")
