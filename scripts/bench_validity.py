"""The validity benchmark (issue 5): the paper's §4.2-4.3 probes, P-Mem beside honest baselines.

    .venv/bin/python scripts/bench_validity.py                 # full deterministic run -> results/validity/
    .venv/bin/python scripts/bench_validity.py --quick --out D  # small n (what CI runs)
    PMEM_LLM_BASE=http://127.0.0.1:8080/v1 .venv/bin/python scripts/bench_validity.py --llm  # + LLM reader

Every arm shares one embedder (all-MiniLM-L6-v2 int8 ONNX, cached), one token counter (the same
model's WordPiece tokenizer) and one context budget in tokens. Deterministic metrics (no LLM):
``gold`` the current value is in the context, ``stale`` a superseded value of the asked slot is in
the context, ``valid`` gold and not stale (the context cannot mislead), ``head`` for a cell read the
asked cell's head is the answer. Value checks are made line by line on lines that name the asked
subject, so a distractor that happens to share a location does not count.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import tempfile
import time
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pmem.adapters.embedders.cache import CachedEmbedder, MemoryEmbeddingCache  # noqa: E402
from pmem.adapters.embedders.onnx_embedder import OnnxEmbedder  # noqa: E402
from pmem.adapters.graph.multihop import graph_guided_context  # noqa: E402
from pmem.adapters.service.ingest import Ingestor, Record  # noqa: E402
from pmem.adapters.service.reader import Reader, TokenCounter  # noqa: E402
from pmem.adapters.service.store import Store  # noqa: E402
from pmem.domain.errors import MissingExtra  # noqa: E402
from pmem.domain.extraction.cloze import match_cloze  # noqa: E402
from pmem.domain.extraction.template import TemplateExtractor  # noqa: E402
from pmem.projections.reading import fit_budget, tail_that_fits  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
ALFWORLD = DATA / "alfworld" / "alfworld_vocab_from_constants.json"
FC_DIR = DATA / "factconsolidation"
LS = (1, 2, 4, 8)
RAW_K, CELL_K = 10, 12
# "P-Mem" is the plain read (hybrid search, no graph); "P-Mem vector only" the same read ranked by cosine alone
FC_ARMS = ("P-Mem", "P-Mem vector only", "P-Mem+graph", "raw", "raw+tags", "CRUD", "long-context")


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
    vocab = json.loads(ALFWORLD.read_text())
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


# -- FactConsolidation ------------------------------------------------------------------------------
def fc_facts(text: str) -> list[str]:
    return [m.group(1) for m in re.finditer(r"^\d+\. (.*)$", text, re.M)]


def slot_chains(facts: Sequence[str]) -> dict[tuple[str, str], list[str]]:
    """(subject, relation) -> its values in stream order."""
    chains: dict[tuple[str, str], list[str]] = {}
    for f in facts:
        m = match_cloze(f[:-1] if f.endswith(".") else f)
        if m is not None:
            cloze, subject, value = m
            chains.setdefault((subject, cloze.relation), []).append(value)
    return chains


def question_slot(q: str, golds: Sequence[str],
                  chains: dict[tuple[str, str], list[str]]) -> tuple[str, list[str]] | None:
    """The slot a single-hop question asks about: its subject is named and its current value is gold."""
    best = None
    for (subject, _), values in chains.items():
        if has(q, subject) and any(norm(values[-1]) == norm(g) for g in golds):
            if best is None or len(subject) > len(best[0]):
                best = (subject, values[:-1])
    return best


class VectorOnly:
    """The store as the reader sees it, searched by the vector channel alone (``ranking="vector"``): the
    plain readout before hybrid search, kept as an arm to compare with."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def search(self, query: str, k: int = CELL_K, *, as_of: int | None = None,
               namespace: str | None = None) -> Any:
        return self.store.search(query, k, as_of=as_of, namespace=namespace, ranking="vector")


def first_line(context: str) -> str:
    return context.split("\n", 1)[0]


def bench_fc(env: Env, name: str, facts: Sequence[str], questions: Sequence[dict[str, Any]]) -> dict[str, Any]:
    arms = FC_ARMS
    tallies = {(a, hop): Tally() for a in arms for hop in ("single", "multi")}
    chains = slot_chains(facts)
    stream = "\n".join(f"{i}. {f}" for i, f in enumerate(facts))
    d = crud(facts)
    t0 = time.perf_counter()
    # The store's own namespace is "fc": graph_guided_context searches and reads the store's namespace,
    # and since the composition root assigning store.namespace no longer moves the reads' default.
    with Store(env.workdir / f"fc-{name}.db", embedder=env.embedder, synchronous="OFF", namespace="fc") as store:
        ingest(store, "fc", facts)
        ingest_s = time.perf_counter() - t0
        reader = Reader(store, counter=env.count)
        vector_reader = Reader(VectorOnly(store), counter=env.count)
        chains_n = 0
        for q in questions:
            hop = "single" if "_sh_" in q["source"] + q["qa_pair_id"] else "multi"
            golds = q["answers"]
            slot = question_slot(q["question"], golds, chains) if hop == "single" else None
            stale = slot[1] if slot else []
            chains_n += bool(stale)
            top = env.top(q["question"], facts, CELL_K)
            ctxs = {"P-Mem": reader.read_cells(q["question"], k=CELL_K, budget=env.budget, namespace="fc").context,
                    "P-Mem vector only": vector_reader.read_cells(q["question"], k=CELL_K, budget=env.budget,
                                                                  namespace="fc").context,
                    # SPEC §8 / issue 6: the single-shot cells plus value -> subject hops in the graph
                    "P-Mem+graph": env.fit(graph_guided_context(store, q["question"], env.embedder, CELL_K)),
                    "raw": env.fit([facts[i] for i in top]),
                    "raw+tags": env.fit([f"[t={i}] {facts[i]}" for i in top]),
                    "CRUD": crud_context(env, q["question"], d, CELL_K),
                    "long-context": tail_that_fits(stream, env.budget, env.count)}
            for arm, ctx in ctxs.items():
                gold = any(has(ctx, g) for g in golds)
                flags: dict[str, bool | None] = {"gold": gold, "top1": any(has(first_line(ctx), g) for g in golds)}
                if stale:
                    subj = slot[0] if slot else ""
                    flags["stale"] = any(has(ln, v) for ln in ctx.splitlines() if has(ln, subj)
                                         for v in stale if all(norm(v) != norm(g) for g in golds))
                    flags["chain"] = True
                if env.llm is not None:
                    ans = env.llm.answer(q["question"], ctx)
                    flags["llm_correct"] = any(has(ans, g) for g in golds)
                tallies[(arm, hop)].add(ctx, env.count, **flags)
    out: dict[str, Any] = {"facts": len(facts), "slots": len(chains), "ingest_s": round(ingest_s, 2),
                           "single-hop questions with an update chain": chains_n}
    for (arm, hop), t in tallies.items():
        s = t.summary()
        if "chain" in s:  # stale rate over the questions with an identifiable update chain
            s["stale"] = round(100 * t.counts.get("stale", 0) / max(t.counts.get("chain", 0), 1), 1)
            del s["chain"]
        out.setdefault(arm, {})[hop] = s
    return out


def synthetic_fc(n_facts: int, seed: int) -> tuple[list[str], list[dict[str, Any]]]:
    """A longer FactConsolidation-style stream from the 6k templates: about 40% of slots get a later
    value; 40 single-hop questions ask about updated slots (gold: the later value)."""
    templates = json.loads((FC_DIR / "mquake_templates" / "cloze_templates.json").read_text())
    qtemplates = json.loads((FC_DIR / "mquake_templates" / "question_templates.json").read_text())
    pids = sorted(p for p in templates if templates[p].startswith("[X]") and p in qtemplates)
    values = sorted({v for vs in slot_chains(fc_facts((FC_DIR / "factconsolidation_6k_context.txt")
                                                      .read_text())).values() for v in vs})
    rng = random.Random(seed)
    slots = max(1, int(n_facts / 1.4))
    facts: list[tuple[float, str]] = []
    updated: list[tuple[str, str, str]] = []
    for s in range(slots):
        subject, pid = f"Entity {s:05d}", rng.choice(pids)
        v1 = rng.choice(values)
        t1 = rng.random()
        facts.append((t1, templates[pid].replace("[X]", subject).replace("__", v1) + "."))
        if rng.random() < 0.4:
            v2 = rng.choice([v for v in values[:200] if v != v1])
            facts.append((t1 + rng.random() * (1 - t1), templates[pid].replace("[X]", subject).replace("__", v2) + "."))
            updated.append((subject, pid, v2))
    facts.sort()
    qs = [{"source": "synthetic_sh", "qa_pair_id": f"synthetic_sh_{i}",
           "question": qtemplates[pid].replace("[X]", subject), "answers": [v2]}
          for i, (subject, pid, v2) in enumerate(rng.sample(updated, min(40, len(updated))))]
    return [f for _, f in facts][:n_facts], qs


# -- output -----------------------------------------------------------------------------------------
def write_outputs(results: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / "table.md").write_text(markdown(results))
    plots(results, out)


def markdown(r: dict[str, Any]) -> str:
    lines = [f"Validity benchmark, commit `{r['meta']['commit']}`, budget {r['meta']['budget']} tokens, "
             f"embedder {r['meta']['embedder']}, n={r['meta']['n']} per L, deterministic reader"
             f"{' + LLM' if r['meta']['llm'] else ''}.", ""]
    rev = r["revision"]
    arms = list(next(iter(rev.values())))
    lines += ["**Revision chains**: valid context (gold present, no superseded value of the target) / "
              "gold present / stale present / head is the answer; mean tokens", "",
              "| arm | " + " | ".join(rev) + " |", "|---|" + "---|" * len(rev)]
    for a in arms:
        cells = []
        for L in rev:
            s = rev[L][a]
            head = f" / head {s['head']}%" if "head" in s else ""
            llm = f" / LLM {s['llm_correct']}%" if "llm_correct" in s else ""
            cells.append(f"valid {s['valid']}% / gold {s['gold']}% / stale {s['stale']}%{head}{llm}; {s['tokens']} tok")
        lines.append(f"| {a} | " + " | ".join(cells) + " |")
    lines += ["", "**Retraction** (recovered / wrong / lost; raw: gold v1 present / v2 present)", "",
              "| d | commit (retention) | CRUD (no retention) | raw top-10 |", "|---|---|---|---|"]
    for d, s in r["retraction"].items():
        c, k, w = s["commit"], s["CRUD"], s["raw"]
        lines.append(f"| {d} | {c['recovered']}% / {c['wrong']}% / {c['lost']}% | {k['recovered']}% / {k['wrong']}% / "
                     f"{k['lost']}% | {w['gold']}% / {w['stale']}% |")
    c = r["contest"]
    lines += ["", f"**Contest/resolve** (n={c['n']}): commit flags the conflict before settling in "
              f"{c['commit']['flagged before settling']}% and is correct after in {c['commit']['correct after']}%; "
              f"CRUD flags {c['CRUD']['flagged before settling']}%, correct after {c['CRUD']['correct after']}%.", ""]
    for name, fc in r["factconsolidation"].items():
        lines += [f"**FactConsolidation {name}** ({fc['facts']} facts, {fc['slots']} slots, "
                  f"{fc['single-hop questions with an update chain']} single-hop questions with an update chain)", "",
                  "| arm | single-hop gold (top-12) | single-hop top-1 | single-hop stale | multi-hop gold | chars "
                  "| tokens |", "|---|---|---|---|---|---|---|"]
        for a in [a for a in FC_ARMS if a in fc]:
            s, m = fc[a]["single"], fc[a].get("multi", {})
            lines.append(f"| {a} | {s.get('gold', '-')}% | {s.get('top1', '-')}% | {s.get('stale', '-')}% | "
                         f"{m.get('gold', '-')}{'%' if m else ''} | {s['chars']} | {s['tokens']} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def plots(r: dict[str, Any], out: Path) -> None:
    try:
        import matplotlib  # only here: the `bench` extra
    except ModuleNotFoundError as e:
        if e.name != "matplotlib":
            raise  # matplotlib is there but broken: the real cause, not a misleading hint
        raise MissingExtra("matplotlib", "bench") from None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rev = r["revision"]
    ls = [int(k.split("=")[1]) for k in rev]
    fig, ax = plt.subplots(figsize=(6, 4))
    styles = ("-o", "--s", ":^", "-.v", "-D")  # equal curves overlap: style and size tell them apart
    for j, a in enumerate(next(iter(rev.values()))):
        ax.plot(ls, [rev[f"L={L}"][a]["valid"] for L in ls], styles[j % len(styles)], label=a,
                markersize=11 - 2 * j, linewidth=3 - 0.4 * j, alpha=0.85)
    ax.set_xscale("log")
    ax.minorticks_off()
    ax.set(xticks=ls, xticklabels=[str(L) for L in ls], xlabel="revisions L", ylim=(-5, 105),
           ylabel="valid context (%)", title="Revision chains: gold present, no stale value")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "accuracy_vs_L.png", dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 4))
    names = list(r["factconsolidation"])
    arms = [a for a in FC_ARMS if all(a in fc for fc in r["factconsolidation"].values())]
    w = 0.8 / max(len(names), 1)
    for j, name in enumerate(names):
        ax.bar([i + j * w for i in range(len(arms))],
               [r["factconsolidation"][name][a]["single"].get("stale", 0) for a in arms], w, label=name)
    ax.set_xticks([i + w * (len(names) - 1) / 2 for i in range(len(arms))], arms, fontsize=8)
    ax.set(ylabel="single-hop stale rate (%)", title="FactConsolidation: stale value in the read context")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "stale_rate.png", dpi=110)
    plt.close(fig)


def git_commit() -> str:
    import subprocess

    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=140, help="revision cases per L, and retraction cases per d")
    p.add_argument("--quick", action="store_true", help="small n (CI): n=4, L in 1 and 4, no synthetic streams")
    p.add_argument("--budget", type=int, default=1024, help="context budget in tokens, shared by every arm")
    p.add_argument("--synthetic", default="2000,5000,18000",
                   help="synthetic FactConsolidation sizes (comma list; '' none)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", type=Path, default=ROOT / "results" / "validity")
    p.add_argument("--llm", action="store_true", help="also run the LLM reader (needs PMEM_LLM_BASE)")
    p.add_argument("--replot", type=Path, help="rewrite the table and plots from this results.json, run nothing")
    a = p.parse_args(argv)
    if a.replot is not None:
        write_outputs(json.loads(a.replot.read_text()), a.out)
        return 0
    n, ls = (4, (1, 4)) if a.quick else (a.n, LS)
    sizes = [] if a.quick else [int(s) for s in a.synthetic.split(",") if s.strip()]
    llm = None
    if a.llm:
        from pmem.adapters.llm.reader import LLMReader

        llm = LLMReader.from_env()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        env = Env(CachedEmbedder(OnnxEmbedder(), MemoryEmbeddingCache()), TokenCounter(), a.budget, Path(tmp), llm)
        results: dict[str, Any] = {"meta": {"commit": git_commit(), "budget": a.budget, "n": n, "seed": a.seed,
                                            "embedder": env.embedder.name, "llm": llm is not None}}
        results["revision"] = bench_revision(env, n, ls, a.seed)
        print(f"revision chains done {time.perf_counter() - t0:.0f}s", file=sys.stderr)
        results["retraction"] = bench_retraction(env, n, (0, 32), a.seed)
        results["contest"] = bench_contest(env, n, a.seed)
        print(f"retraction, contest done {time.perf_counter() - t0:.0f}s", file=sys.stderr)
        fc_text = (FC_DIR / "factconsolidation_6k_context.txt").read_text()
        qs = [json.loads(x) for x in (FC_DIR / "questions_6k.jsonl").read_text().splitlines() if x.strip()]
        if a.quick:
            qs = qs[:8] + qs[40:44]
        results["factconsolidation"] = {"6k": bench_fc(env, "6k", fc_facts(fc_text), qs)}
        for size in sizes:
            facts, sq = synthetic_fc(size, a.seed)
            results["factconsolidation"][f"synthetic {size}"] = bench_fc(env, f"s{size}", facts, sq)
            print(f"synthetic {size} done {time.perf_counter() - t0:.0f}s", file=sys.stderr)
    results["meta"]["seconds"] = round(time.perf_counter() - t0, 1)
    write_outputs(results, a.out)
    sys.stdout.write(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
