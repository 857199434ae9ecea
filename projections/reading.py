"""The read path of docs/reading.md, as pure functions: render cells, gate and prune turns, fit a token budget.

Nothing here does I/O: retrieval (embeddings, FAISS) and tokenizers live in :mod:`pmem.adapters.service.reader`,
which hands this module cell views, turns and a token counter, and gets back the context string an
agent would receive.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from pmem.domain.extraction.grounding import value_problem
from pmem.domain.state import ALTERNATIVE, OPEN
from pmem.domain.views import CellView, VersionView

TokenCount = Callable[[str], int]

# A question asks for a current value when it says so, or asks "what/where/who is ..." in the present
# tense; a question about the past, or one that aggregates over versions, never does (docs/reading.md).
_CURRENT = re.compile(r"\b(now|current(ly)?|latest|still|today|at present|these days|most recent(ly)?)\b"
                      r"|^\s*(what|where|who|which|how much|how many \w+ (is|are))\b.*\b(is|are|'s)\b", re.I)
_PAST_OR_AGGREGATE = re.compile(
    r"\b(was|were|did|used to|before|previous(ly)?|originally|first|earlier|ever|history|all the|"
    r"how many times|how often|list|every|changed?|formerly|prior)\b", re.I)


ALTERNATIVES = ("summary", "all")  # how a cell's open alternatives are listed (docs/reading.md#flooding)


def render_cell(cell: CellView, disclose: Iterable[str] = (), *, alternatives: str = "summary",
                min_trust: int | None = None) -> str:
    """One cell, current value first: ``key = value``, then for a contested cell the head's and every
    alternative's source and trust, ``  [contested: b (watch, trust 50) | +3 lower-trust claims]``, and one
    indented line per disclosure asked for (history newest first, alternatives, support).

    Alternatives whose trust is below the head's are counted, not listed, unless ``alternatives="all"``:
    a low-trust caller can add claims without bound, and must not fill the context with them. Versions
    below ``min_trust`` are left out altogether. A view without its versions renders the bare form."""
    modes = frozenset(disclose)
    shown, hidden = listed_alternatives(cell, alternatives, min_trust)
    lines = [_head_line(cell, shown, hidden, min_trust)]
    if "history" in modes:
        closed = sorted((v for v in cell.versions if v.closed_at is not None and _reaches(v, min_trust)),
                        key=lambda v: v.closed_at or 0, reverse=True)
        if closed:
            lines.append("  history: " + "; ".join(f"{v.value} ({v.status})" for v in closed))
    if "alternatives" in modes and (shown or hidden):
        lines.append("  alternatives: " + "; ".join(
            [f"{v.value} (trust {v.trust}, support {v.support}{_sources(v.sources)})" for v in shown]
            + _more(hidden)))
    if "support" in modes and cell.head is not None and _reaches(cell.head, min_trust):
        h = cell.head
        lines.append(f"  support: {h.support} (trust {h.trust}{_sources(h.sources)})")
    return "\n".join(lines)


def readable(cell: CellView, min_trust: int | None) -> bool:
    """Whether a cell has anything to show under ``min_trust``: its head or an open alternative reaches
    it (a view without versions is taken as it is)."""
    if min_trust is None or not cell.versions:
        return True
    return any(v.status in OPEN and v.trust >= min_trust for v in cell.versions)


def listed_alternatives(cell: CellView, alternatives: str = "summary",
                        min_trust: int | None = None) -> tuple[list[VersionView], int]:
    """(listed, summarised): the open alternatives at or above ``min_trust``, best first, and how many
    of them are below the head's trust and so only counted (none with ``alternatives="all"``)."""
    alts = sorted((v for v in cell.versions if v.status == ALTERNATIVE and _reaches(v, min_trust)),
                  key=lambda v: (-v.trust, -v.support, v.value))
    head = cell.head
    if alternatives == "all" or head is None:
        return alts, 0
    listed = [v for v in alts if v.trust >= head.trust]
    return listed, len(alts) - len(listed)


def _head_line(cell: CellView, shown: Sequence[VersionView], hidden: int, min_trust: int | None) -> str:
    value = cell.value if cell.value is not None else "(empty)"
    head = cell.head
    if not cell.versions or head is None:  # a bare view: no trust to show
        line = f"{cell.key} = {value}"
        if cell.status == "contested" and cell.alternatives:
            line += f"  [contested: {' | '.join(cell.alternatives)}]"
        return line
    if not shown and not hidden:
        return f"{cell.key} = {value}" if _reaches(head, min_trust) else f"{cell.key} = (empty)"
    first = _claim(head) if _reaches(head, min_trust) else f"(no claim with trust >= {min_trust})"
    return f"{cell.key} = {first}  [contested: {' | '.join([_claim(v) for v in shown] + _more(hidden))}]"


def _claim(v: VersionView) -> str:
    """A value with who said it and how much it is trusted: ``B (attacker, trust 10)``."""
    return f"{v.value} ({''.join(s + ', ' for s in v.sources)}trust {v.trust})"


def _more(hidden: int) -> list[str]:
    return [f"+{hidden} lower-trust claim{'s' if hidden != 1 else ''}"] if hidden else []


def _sources(sources: Sequence[str]) -> str:
    return f", sources: {', '.join(sources)}" if sources else ""


def _reaches(v: VersionView, min_trust: int | None) -> bool:
    return min_trust is None or v.trust >= min_trust


def asks_current(question: str) -> bool:
    """The pruning gate: True when the question asks what holds now (not about the past or all versions)."""
    if _PAST_OR_AGGREGATE.search(question):
        return False
    return bool(_CURRENT.search(question))


@dataclass(frozen=True, slots=True)
class Turn:
    """A raw observation as it arrived: its event index, its text, the version it wrote (if any), who said
    it and when, and every ``(cell, vid, value)`` written or supported with this text as evidence."""

    index: int
    text: str
    cell: str | None = None
    vid: int | None = None
    source: str | None = None
    observed_at: str | None = None
    writes: tuple[tuple[str, int, str], ...] = ()

    def wrote(self) -> tuple[tuple[str, int, str], ...]:
        """Its writes; a turn built with only ``cell`` and ``vid`` wrote that version (value unknown)."""
        if self.writes or self.cell is None or self.vid is None:
            return self.writes
        return ((self.cell, self.vid, ""),)


def collect_turns(events: Iterable[Mapping[str, Any]], *, skip_key: Callable[[str], bool] = lambda _: False,
                  min_trust: int | None = None) -> list[Turn]:
    """Every event text once (first arrival), with all the versions written or supported under that text."""
    out: dict[str, Turn] = {}
    for e in events:
        text = e.get("text")
        if not text or skip_key(e["key"]) or (min_trust is not None and e.get("trust", 0) < min_trust):
            continue
        vid = e.get("vid") if e.get("vid") is not None else e.get("target")
        write = ((e["key"], vid, str(e.get("value") or "")),) if e.get("applied") and vid is not None else ()
        if text in out:  # the same text again: one more write, and who and when if the first did not say
            t = out[text]
            out[text] = replace(t, writes=t.writes + write, source=t.source or e.get("source"),
                                observed_at=t.observed_at or e.get("observed_at"))
            continue
        out[text] = Turn(e["event_index"], text, e["key"] if write else None, vid if write else None,
                         e.get("source"), e.get("observed_at"), write)
    return list(out.values())


def render_turn(text: str, source: str | None = None, observed_at: str | None = None) -> str:
    """A turn as the reader sees it: ``[8 May 2023] Caroline (conv-26:D1:3): text`` (what is known of it)."""
    when = with_day("", observed_at)
    return f"{when}{source}: {text}" if source else f"{when}{text}"


def with_day(line: str, when: str | None) -> str:
    """``line`` after the day of ``when`` (an ISO-8601 time): ``[8 May 2023] line``; a ``when`` that is
    not ISO-8601 is shown as it is, and no ``when`` leaves the line alone."""
    if not when:
        return line
    try:
        d = datetime.fromisoformat(when)
    except ValueError:
        return f"[{when}] {line}"
    return f"[{d.day} {d.strftime('%B %Y')}] {line}"


def superseded_turns(turns: Sequence[Turn], supersedes: Mapping[tuple[str, int], int],
                     current: Collection[tuple[str, int]] = ()) -> set[int]:
    """Indices of turns every write of which is displaced, along the supersession graph, by a version that
    another listed turn wrote and that its own text grounds; each pruned write must be grounded in its own
    turn too, and a turn that holds a ``current`` ``(cell, vid)`` is never pruned (docs/reading.md).
    ``supersedes`` maps ``(cell, vid)`` to the vid it displaced."""
    displaced: dict[tuple[str, int], set[int]] = {}  # (cell, vid) -> the turns that displaced it
    for t in turns:
        for cell, vid, value in t.wrote():
            if value and value_problem(value, t.text) is not None:
                continue  # a fact the turn does not support cannot make another turn stale
            seen: set[int] = set()
            prev = supersedes.get((cell, vid))
            while prev is not None and prev not in seen:  # walk back: every ancestor is displaced
                seen.add(prev)
                displaced.setdefault((cell, prev), set()).add(t.index)
                prev = supersedes.get((cell, prev))

    def stale(t: Turn) -> bool:
        ws = t.wrote()
        return bool(ws) and all(
            (c, v) not in current and displaced.get((c, v), set()) - {t.index}
            and (not val or value_problem(val, t.text) is None) for c, v, val in ws)

    return {t.index for t in turns if stale(t)}


def prune_turns(turns: Sequence[Turn], supersedes: Mapping[tuple[str, int], int],
                question: str, current: Collection[tuple[str, int]] = ()) -> tuple[list[Turn], list[Turn]]:
    """(kept, pruned): a turn displaced by another (see :func:`superseded_turns`) is pruned, only behind the gate."""
    if not asks_current(question):
        return list(turns), []
    gone = superseded_turns(turns, supersedes, current)
    return [t for t in turns if t.index not in gone], [t for t in turns if t.index in gone]


def fit_budget(blocks: Sequence[str], budget: int | None, count: TokenCount) -> list[str]:
    """The leading blocks whose joined text (newline-separated) fits in ``budget`` tokens."""
    if budget is None:
        return list(blocks)
    out: list[str] = []
    for b in blocks:
        if count("\n".join([*out, b])) > budget:
            break
        out.append(b)
    return out


def tail_that_fits(text: str, budget: int, count: TokenCount) -> str:
    """The longest suffix of ``text``, cut at a line start, that fits in ``budget`` tokens (long context)."""
    lines = text.splitlines()
    lo, hi = 0, len(lines)  # binary search for the first line to keep
    while lo < hi:
        mid = (lo + hi) // 2
        if count("\n".join(lines[mid:])) <= budget:
            hi = mid
        else:
            lo = mid + 1
    return "\n".join(lines[lo:])


@dataclass(frozen=True, slots=True)
class ReadResult:
    """What a read hands an agent: the context string, its size in characters and tokens, and why."""

    question: str
    mode: str  # cells | turns
    context: str
    tokens: int
    items: tuple[str, ...]  # cell keys, or turn event indices as strings, in context order
    pruned: tuple[str, ...] = ()
    lookups: tuple[str, ...] = ()  # follow-up queries of the iterative readout
    gated: bool = False  # turns mode: whether the question passed the current-value gate
    extra: dict[str, Any] = field(default_factory=dict)
    paths: tuple[str, ...] | None = None  # multi-hop reads: the paths taken, ``a -> relation -> b``

    @property
    def chars(self) -> int:
        return len(self.context)

    def to_dict(self) -> dict[str, Any]:
        return {"question": self.question, "mode": self.mode, "context": self.context,
                "chars": self.chars, "tokens": self.tokens, "items": list(self.items),
                "pruned": list(self.pruned), "lookups": list(self.lookups), "gated": self.gated,
                **({} if self.paths is None else {"paths": list(self.paths)})}
