"""``pmem demo``: the paper's situations, walked through on a fresh temporary store.

Six short scenes (Memory of Memory, section 3 and the probes of section 4): an update, a retraction with
rollback (next to what a plain overwriting dict would do), a held-open conflict settled once, a long revision
chain, a memory-poisoning attempt stopped by source trust, and a read as of an earlier event index. Each
operation prints one line: what was sent, what the store did (applied or not, the op it chose, why) and the
head it left. The store is a real SQLite file in a temporary directory, removed afterwards; the output
carries no timestamps or paths, so it is the same on every run.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, TextIO

from pmem.adapters.service.store import Store, open_store
from pmem.domain.views import CellView, Receipt

SENT_WIDTH = 58  # column where the store's answer starts


class _Narrator:
    """Sends operations to the store and writes a readable account of each one to ``out``."""

    def __init__(self, store: Store, out: TextIO) -> None:
        self.store, self.out = store, out

    def say(self, line: str = "") -> None:
        self.out.write(line + "\n")

    def heading(self, n: int, title: str) -> None:
        self.say()
        self.say(f"{n}. {title}")
        self.say("-" * (len(title) + 3))

    def send(self, op: str, key: str, value: str | None = None, **evidence: Any) -> Receipt:
        receipt: Receipt = getattr(self.store, op)(key, value, **evidence)
        sent = _sent(op, receipt.key, value, evidence)
        self.say(f"  [{receipt.event_index:>2}] {sent:<{SENT_WIDTH}} -> {_did(receipt)}")
        return receipt

    def answer(self, question: str, reply: str) -> None:
        self.say(f"  Q: {question}")
        self.say(f"  A: {reply}")


def _sent(op: str, key: str, value: str | None, evidence: dict[str, Any]) -> str:
    text = f"{op} {key}" + ("" if value is None else f' "{value}"')
    if "source" in evidence:
        text += f" from {evidence['source']}"
    if "trust" in evidence:
        text += f", trust {evidence['trust']}"
    return text


def _did(r: Receipt) -> str:
    if not r.applied:
        what = f"NOT applied ({r.reason})" if r.reason else "NOT applied"
    elif r.op != r.requested:  # e.g. an accept lowered to contest; the reason names the rule
        why = (r.reason or "").removeprefix(f"lowered {r.requested} to {r.op}: ")
        what = f"applied as {r.op}, not {r.requested}" + (f" ({why})" if why else "")
    else:
        what = f"applied: {r.op}" + (f" ({r.reason})" if r.reason else "")
    head = "empty" if r.head is None else f"{r.head.value} ({r.head.status})"
    return f"{what}; head {head}"


def render(cell: CellView) -> str:
    """One cell current-value-first (docs/reading.md): ``key = value  [contested: alt1 | alt2]``."""
    line = f"{cell.key} = {cell.value if cell.value is not None else '(empty)'}"
    if cell.status == "contested":
        line += f"  [contested: {' | '.join(cell.alternatives)}]"
    return line


def _history(n: _Narrator, key: str) -> None:
    n.say(f"  history of {n.store.get(key).key}, oldest first:")
    for v in n.store.history(key).versions:
        spans = ", ".join(f"#{a}-{'now' if b is None else f'#{b}'}" for a, b in v.intervals)
        n.say(f"    {v.value:<16} {v.status:<13} open {spans}")


def personal_best(n: _Narrator) -> None:
    n.heading(1, "An update: the 5K personal best")
    n.send("accept", "5K PB", "27:12", source="log", trust=60)
    n.send("accept", "5K PB", "25:50", source="race", trust=80)
    n.answer("What is my 5K PB now?", n.store.get("5K PB").value or "(nothing)")
    old = next(v for v in n.store.history("5K PB").versions if v.status == "superseded")
    n.answer("What was my old PB?", f"{old.value} ({old.status}, closed at event #{old.closed_at})")


def budget(n: _Narrator) -> int:
    n.heading(2, "A retraction: the budget raise that was withdrawn")
    n.send("accept", "budget", "$30k", source="email")
    raised = n.send("accept", "budget", "$50k", source="chat")
    n.send("revoke", "budget", source="chat", text="scratch that, the raise is off")
    cell = n.store.get("budget")
    n.answer("What is the budget now?", f"{cell.value} (reinstated from history, {cell.status})")
    _history(n, "budget")
    plain: dict[str, str] = {}  # an overwriting store: each write replaces the value, nothing is kept
    plain["budget"] = "$30k"
    plain["budget"] = "$50k"
    n.say("  For comparison, an overwriting store (a plain Python dict, simulated here):")
    n.say(f"    after the raise:            budget = {plain['budget']}  ($30k was overwritten)")
    n.say(f"    retraction ignored:         budget = {plain['budget']}  (still the retracted value)")
    del plain["budget"]
    n.say(f"    retraction by deleting:     budget = {plain.get('budget', '(missing)')}  (the key is gone)")
    n.say("    Either way the dict cannot answer $30k: it kept nothing to go back to.")
    return raised.event_index


def meeting_room(n: _Narrator) -> None:
    n.heading(3, "A conflict: two meeting rooms")
    n.send("accept", "meeting room", "Room A", source="calendar", trust=70)
    n.send("contest", "meeting room", "Room B", source="email", trust=70)
    n.answer("Which room?", f"{render(n.store.get('meeting room'))}  (held open, not guessed)")
    n.send("resolve", "meeting room", "Room B", source="organiser", trust=80, text="We moved to Room B.")
    n.answer("Which room now?", render(n.store.get("meeting room")))
    loser = next(v for v in n.store.history("meeting room").versions if v.value == "Room A")
    n.answer("What became of Room A?", f"kept, recorded as {loser.status}")


LOCATIONS = ("kitchen counter", "dining table", "sink", "dish rack", "cupboard",
             "desk", "dishwasher", "shelf")


def revision_chain(n: _Narrator) -> None:
    n.heading(4, "A revision chain: one mug, eight locations")
    for place in LOCATIONS:
        n.send("accept", "mug location", place, source="camera")
    n.answer("Where is the mug?", n.store.get("mug location").value or "(nothing)")
    _history(n, "mug location")


def poisoning(n: _Narrator) -> None:
    n.heading(5, "Memory poisoning: a low-trust source tries to overwrite")
    n.send("accept", "payee account", "DE44-3131", source="HR", trust=90)
    n.send("accept", "payee account", "GB33-5555", source="web page", trust=10)
    n.send("revoke", "payee account", source="web page", trust=10)
    n.answer("Which account gets paid?",
             f"{render(n.store.get('payee account'))}  (head kept; the planted value only contests)")
    n.send("revoke", "payee account", "GB33-5555", source="HR", trust=90)
    n.answer("And after HR revokes the planted value?", render(n.store.get("payee account")))


def time_travel(n: _Narrator, as_of: int) -> None:
    n.heading(6, f"Time travel: reading as of event #{as_of}")
    then, now = n.store.get("budget", as_of=as_of), n.store.get("budget")
    n.answer(f"What was the budget as of event #{as_of}?", f"{then.value}  (now: {now.value})")
    n.say(f"  frontier as of event #{as_of}:")
    for cell in n.store.frontier(as_of=as_of):
        n.say(f"    {render(cell)}")
    n.say(f"  frontier now (event #{n.store.last_index()}):")
    for cell in n.store.frontier():
        n.say(f"    {render(cell)}")


def run_demo(out: TextIO) -> None:
    """Walk through the six scenes on a fresh store in a temporary directory, writing to ``out``."""
    with tempfile.TemporaryDirectory(prefix="pmem-demo-") as tmp, \
            open_store(Path(tmp) / "demo.db") as store:
        n = _Narrator(store, out)
        n.say("P-Mem demo: every write is an event; nothing displaced is lost.")
        n.say("Each step: [event #] operation sent -> what the store did; resulting head.")
        personal_best(n)
        raised_at = budget(n)
        meeting_room(n)
        revision_chain(n)
        poisoning(n)
        time_travel(n, raised_at)
        n.say()
        n.say(f"Summary: {store.last_index()} events written, {len(store.frontier())} cells.")
