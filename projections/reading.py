"""The read path of docs/reading.md, as pure functions: render cells, gate and prune turns, fit a token budget.

Nothing here does I/O: retrieval (embeddings, FAISS) and tokenizers live in :mod:`pmem.adapters.service.reader`,
which hands this module cell views, turns and a token counter, and gets back the context string an
agent would receive.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pmem.domain.views import CellView

TokenCount = Callable[[str], int]

# A question asks for a current value when it says so, or asks "what/where/who is ..." in the present
# tense; a question about the past, or one that aggregates over versions, never does (docs/reading.md).
_CURRENT = re.compile(r"\b(now|current(ly)?|latest|still|today|at present|these days|most recent(ly)?)\b"
                      r"|^\s*(what|where|who|which|how much|how many \w+ (is|are))\b.*\b(is|are|'s)\b", re.I)
_PAST_OR_AGGREGATE = re.compile(
    r"\b(was|were|did|used to|before|previous(ly)?|originally|first|earlier|ever|history|all the|"
    r"how many times|how often|list|every|changed?|formerly|prior)\b", re.I)


def render_cell(cell: CellView, disclose: Iterable[str] = ()) -> str:
    """One cell, current value first: ``key = value``, ``  [contested: a | b]`` when contested, and
    one indented line per disclosure asked for (history newest first, alternatives, support)."""
    modes = frozenset(disclose)
    line = f"{cell.key} = {cell.value if cell.value is not None else '(empty)'}"
    if cell.status == "contested" and cell.alternatives:
        line += f"  [contested: {' | '.join(cell.alternatives)}]"
    lines = [line]
    if "history" in modes:
        closed = sorted((v for v in cell.versions if v.closed_at is not None),
                        key=lambda v: v.closed_at or 0, reverse=True)
        if closed:
            lines.append("  history: " + "; ".join(f"{v.value} ({v.status})" for v in closed))
    if "alternatives" in modes:
        alts = [v for v in cell.versions if v.status == "alternative"]
        if alts:
            lines.append("  alternatives: " + "; ".join(
                f"{v.value} (trust {v.trust}, support {v.support}{_sources(v.sources)})" for v in alts))
    if "support" in modes and cell.head is not None:
        h = cell.head
        lines.append(f"  support: {h.support} (trust {h.trust}{_sources(h.sources)})")
    return "\n".join(lines)


def _sources(sources: Sequence[str]) -> str:
    return f", sources: {', '.join(sources)}" if sources else ""


def asks_current(question: str) -> bool:
    """The pruning gate: True when the question asks what holds now (not about the past or all versions)."""
    if _PAST_OR_AGGREGATE.search(question):
        return False
    return bool(_CURRENT.search(question))


@dataclass(frozen=True, slots=True)
class Turn:
    """A raw observation as it arrived: its event index, its text, and the version it wrote (if any)."""

    index: int
    text: str
    cell: str | None = None
    vid: int | None = None


def superseded_turns(turns: Sequence[Turn], supersedes: Mapping[tuple[str, int], int]) -> set[int]:
    """Indices of turns whose version is displaced, along the supersession graph, by another turn's
    version in the same list. ``supersedes`` maps ``(cell, vid)`` to the vid it displaced."""
    written = {(t.cell, t.vid) for t in turns if t.cell is not None and t.vid is not None}
    displaced: set[tuple[str, int]] = set()
    for cell, vid in written:
        seen: set[int] = set()
        prev = supersedes.get((cell, vid))
        while prev is not None and prev not in seen:  # walk back: every ancestor is displaced
            seen.add(prev)
            displaced.add((cell, prev))
            prev = supersedes.get((cell, prev))
    return {t.index for t in turns if t.cell is not None and t.vid is not None and (t.cell, t.vid) in displaced}


def prune_turns(turns: Sequence[Turn], supersedes: Mapping[tuple[str, int], int],
                question: str) -> tuple[list[Turn], list[Turn]]:
    """(kept, pruned): the earlier of two supersession-linked turns is pruned, only behind the gate."""
    if not asks_current(question):
        return list(turns), []
    gone = superseded_turns(turns, supersedes)
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

    @property
    def chars(self) -> int:
        return len(self.context)

    def to_dict(self) -> dict[str, Any]:
        return {"question": self.question, "mode": self.mode, "context": self.context,
                "chars": self.chars, "tokens": self.tokens, "items": list(self.items),
                "pruned": list(self.pruned), "lookups": list(self.lookups), "gated": self.gated}
