"""The validity benchmark on FactConsolidation: the 6k stream and its questions, and longer synthetic
streams from the same templates; every arm reads within the same token budget."""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Sequence
from typing import Any

from benchmarks.harness import SHARED_DATA, read_text
from benchmarks.validity_probes import CELL_K, Env, Tally, crud, crud_context, has, ingest, norm
from pmem.adapters.graph.multihop import graph_guided_context
from pmem.adapters.service.reader import Reader
from pmem.adapters.service.store import Store
from pmem.domain.extraction.cloze import match_cloze
from pmem.projections.reading import tail_that_fits

FC_DIR = SHARED_DATA / "factconsolidation"
# "P-Mem" is the plain read (hybrid search, no graph); "P-Mem vector only" the same read ranked by cosine alone
FC_ARMS = ("P-Mem", "P-Mem vector only", "P-Mem+graph", "raw", "raw+tags", "CRUD", "long-context")


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
    # and assigning store.namespace later does not move the reads' default.
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
                    # the single-shot cells plus value -> subject hops in the graph (SPEC §8)
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
    templates = json.loads(read_text(FC_DIR / "mquake_templates" / "cloze_templates.json"))
    qtemplates = json.loads(read_text(FC_DIR / "mquake_templates" / "question_templates.json"))
    pids = sorted(p for p in templates if templates[p].startswith("[X]") and p in qtemplates)
    context = read_text(FC_DIR / "factconsolidation_6k_context.txt")
    values = sorted({v for vs in slot_chains(fc_facts(context)).values() for v in vs})
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
