"""The validity benchmark's shared pieces and its three probes on revision chains (ALFWorld vocabulary):
revisions, a retraction, a contest then a resolve; each P-Mem read beside the baselines of the same cases."""

from __future__ import annotations

import json
import random
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.harness import SHARED_DATA, read_text
from pmem.adapters.service.ingest import Ingestor, Record
from pmem.adapters.service.reader import Reader, TokenCounter
from pmem.adapters.service.store import Store
from pmem.domain.extraction.template import TemplateExtractor
from pmem.projections.reading import fit_budget

ALFWORLD = SHARED_DATA / "alfworld" / "alfworld_vocab_from_constants.json"
RAW_K, CELL_K = 10, 12


def norm(text: str) -> str:
    """Lower-case ASCII words separated by single spaces (the normalized substring match)."""
    t = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower()
    return " " + " ".join(re.findall(r"[a-z0-9]+", t)) + " "


def has(line: str, value: str) -> bool:
    return norm(value) in norm(line)


@dataclass
class Env:
    """What every arm shares."""

    embedder: Any
    count: TokenCounter
    budget: int
    workdir: Path
    llm: Any = None

    def top(self, query: str, texts: Sequence[str], k: int) -> list[int]:
        """Indices of the ``k`` texts most similar to ``query``, best first (cosine, stable ties)."""
        import numpy as np

        if not texts:
            return []
        m = self.embedder.embed(list(texts))
        q = self.embedder.embed([query])[0]
        return [int(i) for i in np.argsort(-(m @ q), kind="stable")[:k]]

    def fit(self, lines: Sequence[str]) -> str:
        return "\n".join(fit_budget(lines, self.budget, self.count))


@dataclass
class Tally:
    """Per-arm counters: deterministic metrics plus read size."""

    n: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    chars: int = 0
    tokens: int = 0

    def add(self, context: str, count: Callable[[str], int], **flags: bool | None) -> None:
        self.n += 1
        self.chars += len(context)
        self.tokens += count(context)
        for name, v in flags.items():
            if v is not None:
                self.counts[name] = self.counts.get(name, 0) + int(v)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"n": self.n, "chars": round(self.chars / max(self.n, 1), 1),
                               "tokens": round(self.tokens / max(self.n, 1), 1)}
        for name, c in sorted(self.counts.items()):
            out[name] = round(100 * c / max(self.n, 1), 1)
        return out


def judge(context: str, subject: str, gold: str, stale: Sequence[str]) -> dict[str, bool]:
    """Deterministic context metrics on the lines naming ``subject``."""
    lines = [ln for ln in context.splitlines() if has(ln, subject)]
    g = any(has(ln, gold) for ln in lines)
    s = any(has(ln, v) for ln in lines for v in stale if norm(v) != norm(gold))
    return {"gold": g, "stale": s, "valid": g and not s}


def llm_flags(env: Env, question: str, context: str, gold: str, stale: Sequence[str]) -> dict[str, bool | None]:
    """End-to-end accuracy with the LLM reader (only when ``--llm``)."""
    if env.llm is None:
        return {}
    answer = env.llm.answer(question, context)
    return {"llm_correct": has(answer, gold),
            "llm_stale": any(has(answer, v) for v in stale if norm(v) != norm(gold)) and not has(answer, gold)}


# -- revision chains (ALFWorld-Revision style) -------------------------------------------------------
def alfworld_vocab() -> tuple[list[str], list[str]]:
    vocab = json.loads(read_text(ALFWORLD))
    places = sorted({r.lower() for r in vocab["RECEPTACLES"]})
    # Some names are both (a coffeemachine, a pot): an object must never be "in" a copy of itself.
    objects = sorted({o.lower() for o in vocab["OBJECTS_SINGULAR"]} - set(places))
    return objects, places


def chain(obj: str, stops: Sequence[str]) -> list[str]:
    out = [f"Earlier observation: {obj} was in {stops[0]}."]
    out += [f"Update: {obj} has been moved from {a} to {b}." for a, b in zip(stops, stops[1:], strict=False)]
    return out


def interleave(queues: list[list[str]], rng: random.Random) -> list[str]:
    """Seeded random draws across per-chain queues, each queue kept in order."""
    qs = [list(q) for q in queues]
    out: list[str] = []
    while any(qs):
        q = rng.choice([q for q in qs if q])
        out.append(q.pop(0))
    return out


def revision_case(L: int, rng: random.Random, objects: list[str], places: list[str]) -> dict[str, Any]:
    objs = [f"{o} {rng.randint(1, 9)}" for o in rng.sample(objects, 5)]
    stops = [[f"{p} {rng.randint(1, 9)}" for p in rng.sample(places, L + 1)] for _ in objs]
    stream = interleave([chain(o, s) for o, s in zip(objs, stops, strict=True)], rng)
    return {"object": objs[0], "gold": stops[0][-1], "stale": stops[0][:-1], "stream": stream,
            "question": f"Where is {objs[0]} now?"}


def ingest(store: Store, namespace: str, lines: Sequence[str]) -> None:
    """Write ``lines`` through the template extractor and annotator into ``namespace``."""
    store.namespace = namespace  # the Ingestor writes to the store's namespace
    for _ in Ingestor(store, TemplateExtractor(), source="bench").run(
            Record(i + 1, t) for i, t in enumerate(lines)):
        pass


def crud(lines: Sequence[str]) -> dict[str, str]:
    """The CRUD baseline: one dict, overwritten by every fact, a retraction deletes (no retention)."""
    ex, d = TemplateExtractor(), {}
    for i, t in enumerate(lines):
        for f in ex.extract(t, i + 1).facts:
            if f.status == "withdrawn" or f.op_hint in ("revoke", "reject"):
                d.pop(f.key, None)
            else:
                d[f.key] = f.value
    return d


def crud_context(env: Env, question: str, d: dict[str, str], k: int) -> str:
    items = sorted(d.items())
    order = env.top(question, [f"{k_.replace('_', ' ')}: {v}" for k_, v in items], k)
    return env.fit([f"{items[i][0]} = {items[i][1]}" for i in order])


def raw_arms(env: Env, question: str, stream: Sequence[str], k: int) -> dict[str, str]:
    """The three query-time reads of the raw stream: similarity order, arrival tags, oracle order."""
    top = env.top(question, stream, k)
    return {"raw": env.fit([stream[i] for i in top]),
            "raw+tags": env.fit([f"[t={i + 1}] {stream[i]}" for i in top]),
            "raw oracle order": env.fit([stream[i] for i in sorted(top)])}


def bench_revision(env: Env, n: int, ls: Sequence[int], seed: int) -> dict[str, Any]:
    objects, places = alfworld_vocab()
    out: dict[str, Any] = {}
    for L in ls:
        rng = random.Random(seed * 1000 + L)
        cases = [revision_case(L, rng, objects, places) for _ in range(n)]
        tallies = {a: Tally() for a in ("commit", "raw", "raw+tags", "raw oracle order", "CRUD")}
        with Store(env.workdir / f"chains-L{L}.db", embedder=env.embedder, synchronous="OFF") as store:
            for i, c in enumerate(cases):
                ingest(store, f"c{i}", c["stream"])
            reader = Reader(store, counter=env.count)
            for i, c in enumerate(cases):
                q, subj = c["question"], c["object"]
                r = reader.read_cells(q, k=CELL_K, budget=env.budget, namespace=f"c{i}")
                head = store.get(f"{subj}.location".replace(" ", "_"), namespace=f"c{i}").value
                tallies["commit"].add(r.context, env.count, **judge(r.context, subj, c["gold"], c["stale"]),
                                      head=head == c["gold"], **llm_flags(env, q, r.context, c["gold"], c["stale"]))
                for arm, ctx in raw_arms(env, q, c["stream"], RAW_K).items():
                    tallies[arm].add(ctx, env.count, **judge(ctx, subj, c["gold"], c["stale"]),
                                     **llm_flags(env, q, ctx, c["gold"], c["stale"]))
                d = crud(c["stream"])
                ctx = crud_context(env, q, d, CELL_K)
                tallies["CRUD"].add(ctx, env.count, **judge(ctx, subj, c["gold"], c["stale"]),
                                    head=d.get(f"{subj}.location".replace(" ", "_")) == c["gold"],
                                    **llm_flags(env, q, ctx, c["gold"], c["stale"]))
        out[f"L={L}"] = {a: t.summary() for a, t in tallies.items()}
    return out


# -- retraction -------------------------------------------------------------------------------------
def bench_retraction(env: Env, n: int, ds: Sequence[int], seed: int) -> dict[str, Any]:
    objects, places = alfworld_vocab()
    out: dict[str, Any] = {}
    for d in ds:
        rng = random.Random(seed * 7 + d)
        outcome = {a: {"recovered": 0, "wrong": 0, "lost": 0} for a in ("commit", "CRUD")}
        raw = Tally()
        with Store(env.workdir / f"retraction-d{d}.db", embedder=env.embedder, synchronous="OFF") as store:
            for i in range(n):
                obj = f"{rng.choice(objects)} {rng.randint(1, 9)}"
                v1, v2 = (f"{p} {rng.randint(1, 9)}" for p in rng.sample(places, 2))
                others = [o for o in objects if o != obj.split()[0]]
                noise = [f"Earlier observation: {rng.choice(others)} {rng.randint(1, 9)} was in "
                         f"{rng.choice(places)} {rng.randint(1, 9)}." for _ in range(d)]
                stream = [f"Earlier observation: {obj} was in {v1}.",
                          f"Update: {obj} has been moved from {v1} to {v2}.", *noise,
                          f"The move of {obj} to {v2} was reported in error."]
                ingest(store, f"r{i}", stream)
                key = f"{obj}.location".replace(" ", "_")
                _outcome(outcome["commit"], store.get(key, namespace=f"r{i}").value, v1)
                _outcome(outcome["CRUD"], crud(stream).get(key), v1)
                q = f"Where is {obj} now?"
                ctx = raw_arms(env, q, stream, RAW_K)["raw"]
                raw.add(ctx, env.count, **judge(ctx, obj, v1, [v2]), **llm_flags(env, q, ctx, v1, [v2]))
        out[f"d={d}"] = {**{a: {k: round(100 * v / n, 1) for k, v in o.items()} for a, o in outcome.items()},
                         "raw": raw.summary()}
    return out


def _outcome(counts: dict[str, int], value: str | None, gold: str) -> None:
    counts["lost" if value is None else "recovered" if value == gold else "wrong"] += 1


# -- contest / resolve ------------------------------------------------------------------------------
def bench_contest(env: Env, n: int, seed: int) -> dict[str, Any]:
    """Two reports with no cue between them: the writer contests (SPEC §3), 8 distractors, a resolve."""
    objects, places = alfworld_vocab()
    rng = random.Random(seed)
    flagged = correct = crud_correct = 0
    with Store(env.workdir / "contest.db", embedder=env.embedder, synchronous="OFF") as store:
        reader = Reader(store, counter=env.count)
        for i in range(n):
            store.namespace = f"k{i}"
            obj = f"{rng.choice(objects)} {rng.randint(1, 9)}"
            a, b = (f"{p} {rng.randint(1, 9)}" for p in rng.sample(places, 2))
            store.accept(f"{obj}.location", a, source="sensor-1", text=f"{obj} is in {a}.")
            store.contest(f"{obj}.location", b, source="sensor-2", text=f"{obj} is in {b}.")
            for o in rng.sample([x for x in objects if x != obj.split()[0]], 8):
                store.accept(f"{o} {rng.randint(1, 9)}.location", f"{rng.choice(places)} {rng.randint(1, 9)}")
            ctx = reader.read_cells(f"Where is {obj} now?", k=CELL_K, budget=env.budget).context
            line = next((ln for ln in ctx.splitlines() if has(ln, obj)), "")
            flagged += "[contested:" in line and has(line, a) and has(line, b)
            settled = rng.choice([a, b])
            store.resolve(f"{obj}.location", settled, source="owner", text=f"{obj} is definitely in {settled}.")
            correct += store.get(f"{obj}.location").value == settled
            crud_correct += 1  # CRUD's last write is the settling one; it never flags the conflict
    return {"commit": {"flagged before settling": round(100 * flagged / n, 1),
                       "correct after": round(100 * correct / n, 1)},
            "CRUD": {"flagged before settling": 0.0, "correct after": round(100 * crud_correct / n, 1)}, "n": n}
