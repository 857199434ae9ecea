"""Grounded extraction from a real conversation, measured on LoCoMo against hand-written gold facts.

Ingests LoCoMo conversation 0 (``conv-26``), sessions 1-3 (``--quick``: session 1), through the LLM
extractor of a live model server (the local route, scripts/local-llm.sh), and reports:

- precision: written facts that match a gold fact of the same turn, about the same person (the subject
  of the key), with a value sharing at least half of its content words with the gold value;
- recall: gold facts matched by a written fact;
- the same two judged by hand, attribute-aware (``--judged``, verdicts on each written fact): precision counts
  the facts judged true of the attribute their key names (the gold match above does not look at the
  attribute: ``caroline.gift = Sweden`` matches the gold ``home_country = Sweden``), recall the gold facts
  matched by a fact judged true; a fact with no verdict counts as not true and is listed;
- ungrounded values written: a written value with a content word or number that is not in its turn;
- example-key leaks: written keys holding a key or value any version of the prompt gave as an example;
- seconds per turn (the baseline, measured in the same run: the template extractor on the same turns).

Then the wrong-cells check: six LoCoMo turns (Andrew and Audrey,
``benchmarks/data/locomo_andrew_audrey_turns.json``), ingested the same way, must write none of the six wrong
cells a small model once wrote from them. Question answering over the same recordings is
``benchmarks.locomo``'s.

    .venv/bin/python -m benchmarks.extraction [--data PATH/locomo_conv0-4.json] [--quick] \\
        [--base http://127.0.0.1:8090/v1] [--model openai/qwen] [--record FILE] [--replay FILE] [--no-verify] \\
        [--slots both|off|fallback|only] [--sessions 4 --gold benchmarks/data/locomo_gold_conv0_s4.jsonl]

With no model server, replay the recorded answers (benchmarks/data/README.md lists them):

    .venv/bin/python -m benchmarks.extraction --replay benchmarks/data/locomo_answers_conv0_s1-3_both.jsonl

Several slices at once give their figures together: ``--sessions 6,7`` with ``--gold`` and ``--replay`` given
once per slice (the held-out sessions 6 and 7).

``--record FILE`` saves every model call (a hash of its messages and schema, and the raw answer) as JSON
lines; ``--replay FILE`` (repeatable) answers every call from such files through litellm's ``mock_response``, so a
change to the grounding rules is re-scored in seconds without a model (the answers depend on the prompt:
after a prompt change, record again). A call not in the file stops the run, naming it. Both together
replay what the first file has and record the rest with the model: the verification pass over recorded
extraction answers asks the model only its own questions. ``--no-verify`` measures the extractor without
that pass; ``--slots`` chooses when the slot card is asked, by default as the extractor does (``both``: the
free-form pass and the card on every turn; ``--slots off`` for the free-form pass alone).

The gold facts (benchmarks/data, CC BY-NC 4.0 like LoCoMo itself) are the measure; no test runs this.
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pmem
from benchmarks.harness import DATA, SHARED_DATA, Run, add_output_options, read_text
from pmem.adapters.llm import extractor as extractor_module
from pmem.adapters.llm.client import LlmSettings, _litellm
from pmem.adapters.llm.extractor import LlmExtractor
from pmem.adapters.service.ingest import Ingestor
from pmem.adapters.sources.locomo import locomo_records
from pmem.adapters.sources.record import Record
from pmem.domain.extraction.facts import Extraction, subject_slug
from pmem.domain.extraction.grounding import Utterance, content, numbers
from pmem.domain.extraction.slot_modes import DEFAULT_SLOT_MODE, SLOT_MODES
from pmem.domain.extraction.template import DialogueTemplateExtractor

DEFAULT_DATA = SHARED_DATA / "locomo" / "locomo_conv0-4.json"
LEAKS = ("personal_best", "5k", "27_12", "france", "capital", "attribute", "subject")
"""Example keys and values of every prompt version so far, and schema words: none may appear in a key."""
WRONG_CELLS = [("andrew.personal_best_5k_time", "2023-04-15"), ("audrey.new_job", "Congrats on the new job!"),
               ("audrey.personal_best_5k_time", "3 years"), ("andrew.name", "Cute little guys"),
               ("audrey.favorite_type_of_bird", "parrot"), ("andrew.personal_best_5k_time", "never")]
"""Six wrong cells a small model wrote from the Andrew and Audrey turns: none may be written; the stricter
count also takes the same person and value under any other key (``audrey.age = 3 years`` is as wrong: she
has had her dogs for 3 years)."""


class NotRecorded(BaseException):
    """A replayed call whose request is not in the file. A ``BaseException``: the client turns every
    ``Exception`` of a call into a recorded reason, and a miss must stop the run instead."""


def call_id(kwargs: dict[str, Any]) -> str:
    """The request's identity: a hash of its messages and its response schema (not of the server or timeout)."""
    request = {"messages": kwargs["messages"], "response_format": kwargs.get("response_format")}
    return hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()[:32]


class Tape:
    """Replays ``litellm.completion`` answers from a JSON-lines file (``replay``), records every answer of the
    run to one (``record``), or both: a call found in ``replay`` is answered from it, any other goes to the
    model, and every answer is written to ``record`` (a new pass over old answers records only the new calls).
    With ``cache``, ``record`` is appended to, not emptied, and only the calls the model answered are written
    to it; a request asked again gets its last recorded answer (the model answers at temperature 0).
    Installed on the litellm module the client imports, so production code is unchanged."""

    def __init__(self, record: Path | None, replay: Sequence[Path], cache: bool = False) -> None:
        self.record, self.replay, self.cache = record, ", ".join(map(str, replay)), cache
        self.answers: dict[str, list[dict[str, Any]]] = {}  # per request, its answers in the order given
        for line in (line for path in replay for line in read_text(path).splitlines() if line.strip()):
            entry = json.loads(line)
            self.answers.setdefault(entry["id"], []).append(entry)
        self.asked = 0  # calls that went to the model in this run
        if record and not cache:
            record.write_text("")
        self.litellm = _litellm()
        self.real = self.litellm.completion
        while isinstance(getattr(self.real, "__self__", None), Tape):  # a tape installed before: not stacked
            self.real = self.real.__self__.real
        self.litellm.completion = self.completion

    def completion(self, **kwargs: Any) -> Any:
        key = call_id(kwargs)
        queue = self.answers.get(key)
        if self.cache and queue and len(queue) == 1 and not queue[0].get("error"):
            entry: dict[str, Any] | None = queue[0]
        else:
            entry = queue.pop(0) if queue else None  # a retry after a failed call repeats the same request
        if entry is None and self.record is None:
            user = kwargs["messages"][-1]["content"].splitlines()[-1][:80]
            raise NotRecorded(f"--replay {self.replay}: call {key} (last message {user!r}) is not recorded")
        asked = entry is None
        entry = entry or {"id": key}
        self.asked += asked
        try:
            return self._ask(entry, kwargs) if asked else self._answer(entry, kwargs)
        finally:
            if self.record and (not self.cache or (asked and "answer" in entry)):  # a cache keeps no failures
                with self.record.open("a") as f:
                    f.write(json.dumps({**entry, "messages": kwargs["messages"]}) + "\n")
            if self.cache and asked and "answer" in entry:
                self.answers[key] = [entry]

    def _answer(self, entry: dict[str, Any], kwargs: dict[str, Any]) -> Any:
        if entry.get("error"):
            raise RuntimeError(entry["error"])
        return self.real(**{**kwargs, "mock_response": entry["answer"]})

    def _ask(self, entry: dict[str, Any], kwargs: dict[str, Any]) -> Any:
        try:
            response = self.real(**kwargs)
            entry["answer"] = response.choices[0].message.content
            return response
        except Exception as e:
            entry["error"] = f"{type(e).__name__}: {e}"[:300]
            raise


class Recording:
    """The extractor under test, keeping every extraction it returned (by record number) and its time."""

    name = "llm"

    def __init__(self, inner: Any) -> None:
        self.inner, self.got, self.seconds = inner, {}, 0.0

    def extract(self, text: str, record: int, said: Utterance | None = None) -> Extraction:
        started = time.perf_counter()
        x: Extraction = self.inner.extract(text, record, said)
        self.seconds += time.perf_counter() - started
        self.got[record] = x
        return x


def conversation(path: Path, sessions: Sequence[int], turns: int | None = None) -> dict[str, Any]:
    """Conversation 0 with only ``sessions`` (and of those, only the first ``turns`` turns)."""
    sample = json.loads(read_text(path))[0]
    conv = sample["conversation"]
    keep = {k: v for k, v in conv.items() if not (m := re.match(r"session_(\d+)", k)) or int(m[1]) in sessions}
    left = turns if turns is not None else sum(len(v) for k, v in keep.items() if re.fullmatch(r"session_\d+", k))
    for k in sorted((k for k in keep if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1])):
        keep[k], left = keep[k][:left], max(0, left - len(keep[k]))
    return {**sample, "conversation": keep}


def ingest(sample: dict[str, Any], extractor: Any, db: Path) -> tuple[pmem.Store, list[Record], Recording]:
    records = locomo_records(json.dumps(sample).encode())
    store = pmem.open(str(db))
    rec = Recording(extractor)
    list(Ingestor(store, rec, source="bench").run(records))
    return store, records, rec


def written(records: list[Record], rec: Recording) -> list[tuple[Record, str, str]]:
    """(turn, key, value) of every fact handed to the store."""
    by = {r.number: r for r in records}
    return [(by[n], f.key, f.value) for n, x in sorted(rec.got.items()) for f in x.facts]


def dia(r: Record) -> str:
    """The LoCoMo turn id in a record's source, ``Caroline (conv-26:D1:3)`` -> ``D1:3``."""
    m = re.search(r"(D\d+:\d+)\)?$", r.source or "")
    return m[1] if m else ""


def matches(value: str, gold: str) -> bool:
    a, b = content(value), content(gold)
    return bool(a & b) and len(a & b) >= min(len(a), len(b)) / 2


def gold_hits(r: Record, key: str, value: str, gold: list[dict[str, str]]) -> list[int]:
    """The gold facts a written fact matches: same turn, same person, the value's words."""
    subject = key.split(".", 1)[0]
    return [i for i, g in enumerate(gold) if g["dia_id"] == dia(r) and subject_slug(g["subject"]) == subject
            and matches(value, g["value"])]


Judged = dict[tuple[str, str, str], dict[str, Any]]


def verdict(r: Record, key: str, value: str, judged: Judged) -> dict[str, Any] | None:
    """The hand verdict on a written fact (its turn, key and value), or None when it has none."""
    return judged.get((dia(r), key, value))


def judged_score(facts: list[tuple[Record, str, str]], gold: list[dict[str, str]],
                 judged: Judged) -> dict[str, Any]:
    """Precision and recall by the hand verdicts: a fact counts only when it is judged true of that
    attribute of that person (the gold match alone does not look at the attribute). Recall counts the
    gold facts matched by a fact judged true; unjudged facts count as not true, and are listed."""
    true = [(r, k, v) for r, k, v in facts if (verdict(r, k, v, judged) or {}).get("true")]
    found = {i for r, k, v in true for i in gold_hits(r, k, v, gold)}
    unjudged = [(dia(r), k, v) for r, k, v in facts if verdict(r, k, v, judged) is None]
    return {"precision": len(true) / len(facts) if facts else None, "recall": len(found) / len(gold),
            "unjudged": unjudged}


def score(facts: list[tuple[Record, str, str]], gold: list[dict[str, str]]) -> dict[str, Any]:
    hits, found = 0, set()
    for r, key, value in facts:
        ok = gold_hits(r, key, value, gold)
        hits += bool(ok)
        found.update(ok)
    ungrounded = [(dia(r), k, v) for r, k, v in facts
                  if numbers(v) - numbers(r.text or "") or content(v) - content(r.text or "")]
    leaks = [k for _, k, _ in facts if any(w in k for w in LEAKS)]
    return {"written": len(facts), "precision": hits / len(facts) if facts else None,
            "recall": len(found) / len(gold), "ungrounded": ungrounded, "leaks": leaks}


def wrong_cells_check(extractor: Any, tmp: Path) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(the listed wrong cells written, the same person and value written under any key)."""
    sample = json.loads(read_text(DATA / "locomo_andrew_audrey_turns.json"))
    _, records, rec = ingest(sample, extractor, tmp / "andrew_audrey.db")
    facts = written(records, rec)
    for _, k, v in facts:
        print(f"  the Andrew and Audrey turns wrote {k} = {v!r}")
    same = [(k, v) for _, k, v in facts for bad_key, bad in WRONG_CELLS
            if k.split(".", 1)[0] == bad_key.split(".", 1)[0] and v.strip().lower() == bad.lower()]
    return [(k, v) for k, v in same if (k, v) in WRONG_CELLS], same


def holds(context: str, answer: str) -> bool:
    """Whether ``context`` holds at least half of the content words of ``answer`` (none: False)."""
    want = content(answer)
    return bool(want) and len(want & content(context)) >= len(want) / 2


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=Path(os.environ.get("PMEM_LOCOMO", DEFAULT_DATA)))
    p.add_argument("--base", default=os.environ.get("PMEM_LLM_BASE", "http://127.0.0.1:8090/v1"))
    p.add_argument("--model", default=os.environ.get("PMEM_LLM_MODEL", "openai/qwen"))
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per model call (a busy CPU is slow)")
    p.add_argument("--quick", action="store_true", help="session 1 only (13 model calls)")
    p.add_argument("--sessions", default="1,2,3", help="the sessions of conversation 0 measured (default 1,2,3)")
    p.add_argument("--gold", type=Path, action="append",
                   help="the gold facts (default: sessions 1-3's); repeated, from all the files given")
    p.add_argument("--judged", type=Path, default=DATA / "locomo_judged_conv0.jsonl",
                   help="hand verdicts on written facts (turn, key, value: true or not, and why)")
    p.add_argument("--turns", type=int, default=None, help="only the first N turns of the sessions measured")
    p.add_argument("--max-tokens", type=int, help="bound each extraction answer (default: the server's)")
    p.add_argument("--prompt", type=Path, help="ask with this extraction prompt instead of the extractor's own")
    p.add_argument("--record", type=Path, help="save every model call's request hash and answer (JSON lines)")
    p.add_argument("--replay", type=Path, action="append", default=[],
                   help="answer every model call from a --record file, no model (with --record: the calls not in "
                        "it go to the model); repeated, from all the files given")
    p.add_argument("--no-verify", dest="verify", action="store_false", help="no verification pass (the extractor's "
                                                                           "blind second question per fact)")
    p.add_argument("--slots", choices=SLOT_MODES, default=DEFAULT_SLOT_MODE,
                   help=f"ask the slot card: as well as the first pass (both), for turns the first pass left "
                        f"without a fact (fallback), instead of the first pass (only) or never (off); default: the "
                        f"extractor's ({DEFAULT_SLOT_MODE})")
    p.add_argument("--reply-context", action="store_true",
                   help="show the model the turn each turn answers (context only, never a source of values)")
    add_output_options(p, "extraction")
    args = p.parse_args(argv)
    if args.record and args.record.resolve() in {r.resolve() for r in args.replay}:
        p.error("--record and --replay must be different files")
    if args.record or args.replay:
        Tape(args.record, args.replay)
    if args.prompt:  # read at each call, so the module's constant is the one place to change
        extractor_module.EXTRACT_PROMPT = read_text(args.prompt)
    sessions = (1,) if args.quick else tuple(int(n) for n in args.sessions.split(","))
    sample = conversation(args.data, sessions, args.turns)
    kept = {t["dia_id"] for k, v in sample["conversation"].items() if re.fullmatch(r"session_\d+", k) for t in v}
    gold = [json.loads(line) for path in args.gold or [DATA / "locomo_gold_conv0_s1-3.jsonl"]
            for line in read_text(path).splitlines()]
    gold = [g for g in gold if g["dia_id"] in kept]
    settings = LlmSettings(args.model, args.base, timeout_s=args.timeout, attempts=2, max_tokens=args.max_tokens)
    llm = LlmExtractor(settings, verify=args.verify, slots=args.slots, reply_context=args.reply_context)
    run = Run("extraction", args.results)
    with tempfile.TemporaryDirectory() as tmp:
        listed, same = wrong_cells_check(llm, Path(tmp))  # first: three model calls
        print(f"wrong-cells check: listed wrong cells written {len(listed)} {listed} -> "
              f"{'PASS' if not listed else 'FAIL'}; same person and value under any key {len(same)} {same}")
        run.figures["wrong_cells"] = {"listed_written": listed, "same_person_and_value": same}
        calls = llm.model.calls
        store, records, rec = ingest(sample, llm, Path(tmp) / "llm.db")
        base = Recording(DialogueTemplateExtractor())
        ingest(sample, base, Path(tmp) / "template.db")
        judged = {(j["dia_id"], j["key"], j["value"]): j
                  for j in map(json.loads, read_text(args.judged).splitlines())}
        report(run, args.model, sessions, records, rec, base, gold, judged, llm.model.calls - calls,
               bool(args.replay) and args.record is None)
        store.close()
    run.finish()


def report(run: Run, model: str, sessions: Sequence[int], records: list[Record], rec: Recording, base: Recording,
           gold: list[dict[str, str]], judged: Judged, calls: int, replayed: bool = False) -> None:
    facts = written(records, rec)
    for r, k, v in facts:
        j = verdict(r, k, v, judged)
        said = "unjudged" if j is None else "judged true" if j["true"] else f"judged wrong: {j['why']}"
        print(f"  {dia(r)} wrote {k} = {v!r}{'' if gold_hits(r, k, v, gold) else '  (not in the gold)'}  [{said}]")
    for n, x in sorted(rec.got.items()):
        for why in x.dropped:
            print(f"  record {n} dropped {why}")
    s = score(facts, gold)
    j = judged_score(facts, gold, judged)
    for name, listed in (("ungrounded", s["ungrounded"]), ("leaks", s["leaks"]), ("unjudged", j["unjudged"])):
        if listed:
            print(f"  {name}: {listed}")
    row = {"model": model, "sessions": ",".join(map(str, sessions)), "turns": len(records), "gold facts": len(gold),
           "model calls": calls, "written": s["written"], "precision": s["precision"], "recall": s["recall"],
           "judged precision": j["precision"], "judged recall": j["recall"], "ungrounded": len(s["ungrounded"]),
           "leaks": len(s["leaks"]), "unjudged (not true)": len(j["unjudged"]),
           "s/turn": "replayed" if replayed else rec.seconds / len(records)}
    run.table([row], "Extraction on LoCoMo conv-26 (judged: attribute-aware verdicts by hand)")
    run.figures["extraction"] = {**row, "ungrounded_facts": s["ungrounded"], "leaked_keys": s["leaks"],
                                 "unjudged_facts": j["unjudged"]}
    if not replayed:
        run.beside("LLM extractor s/turn", rec.seconds / len(records), "template extractor s/turn",
                   base.seconds / len(records), "s")


if __name__ == "__main__":
    try:
        main()
    except NotRecorded as e:
        sys.exit(f"error: {e}")
