"""The read path (docs/reading.md): what context string an agent receives for a question.

- ``cells`` mode: top-L cells by cosine over ``key: value`` (``Store.search``), rendered current-value
  first with the chosen disclosures; an optional :class:`LookupPlanner` (an LLM) may then issue up to 3
  follow-up lookups of 6 further cells each (iterative readout).
- ``turns`` mode: top-L raw observations (the evidence ``text`` of the log's events) by cosine to the
  question, each shown with its date, speaker and source; a turn is pruned when every fact it wrote is
  superseded by a fact another retrieved turn grounds (:func:`pmem.projections.reading.superseded_turns`),
  but only when the question asks for a current value (the gate).

Either way the context is cut to a budget counted in tokens by a real tokenizer (the packaged
all-MiniLM-L6-v2 WordPiece ``tokenizer.json``), and the result reports characters and tokens.

P-Mem's own cells (keys starting with ``_``: soft-identity aliases ``_alias.*``, recorded extraction
failures) are not the user's facts: ``cells`` mode leaves them out, and ``turns`` mode leaves out the
text of alias events (P-Mem's own evidence, not an observation), unless ``system`` is asked for
(``Reader(store, system=True)``, or the store wrapped in :class:`WithSystemCells`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pmem.domain.errors import InvalidOperation
from pmem.domain.extraction.key_identity import ALIAS_PREFIX, is_system_key
from pmem.domain.state import OPEN
from pmem.projections.reading import (
    ReadResult,
    Turn,
    collect_turns,
    fit_budget,
    prune_turns,
    readable,
    render_cell,
    render_turn,
    with_day,
)

if TYPE_CHECKING:
    from pmem.domain.views import CellView, History
    from pmem.projections.graph import Fact
    from pmem.projections.ports import Embedder
    from pmem.projections.vectors import SearchResult

DEFAULT_L = 12  # docs/reading.md: top L cells
MAX_LOOKUPS = 3  # docs/reading.md: iterative readout, up to 3 follow-up lookups ...
LOOKUP_CELLS = 6  # ... of 6 further cells each
REFILL_FACTOR = 4  # a turn read looks at most this many times k turns down the ranking to fill pruned places
MODES = ("cells", "turns")
MAX_HOPS = 6  # docs/reading.md#multi-hop-reading: the longest path --hops follows


class Memory(Protocol):
    """What the reader reads through (the :class:`~pmem.adapters.service.store.Store` is one)."""

    @property
    def embedder(self) -> Embedder: ...

    def search(self, query: str, k: int = ..., *, as_of: int | None = None,
               namespace: str | None = None) -> list[SearchResult]: ...

    def get(self, key: str, *, as_of: int | None = None, disclose: Iterable[str] = (),
            namespace: str | None = None) -> CellView: ...

    def history(self, key: str, *, as_of: int | None = None, namespace: str | None = None) -> History: ...

    def log(self, *, after: int = 0, limit: int | None = None, namespace: str | None = None,
            as_of: int | None = None) -> list[dict[str, Any]]: ...

    def graph_facts(self, subjects: Iterable[str], *, as_of: int | None = None,
                    namespace: str | None = None) -> dict[str, list[Fact]]: ...


class TokenCounter:
    """Counts tokens with the MiniLM WordPiece tokenizer shipped in ``adapters/data`` (no special tokens,
    no truncation). Loaded on first use; no network."""

    def __init__(self) -> None:
        self._tok: Any = None
        self._lock = threading.Lock()

    def __call__(self, text: str) -> int:
        if not text:
            return 0
        with self._lock:
            if self._tok is None:
                from tokenizers import Tokenizer

                from pmem.adapters.embedders.onnx_embedder import TOKENIZER_PATH

                tok = Tokenizer.from_file(str(TOKENIZER_PATH))
                tok.no_truncation()
                tok.no_padding()
                self._tok = tok
        return len(self._tok.encode(text, add_special_tokens=False).ids)


SHARED_COUNTER = TokenCounter()  # one tokenizer per process, loaded on first count


@dataclass(frozen=True, slots=True)
class Policy:
    """How a cells read renders: the disclosures, whether every alternative is listed (``all``) or those
    below the head's trust only counted (``summary``), the trust below which versions are left out, and
    whether each cell shows the day its current value was observed."""

    disclose: frozenset[str] = frozenset()
    alternatives: str = "summary"
    min_trust: int | None = None
    dated: bool = False  # each cell after the day its current value was observed (docs/reading.md#dated-cells)


class LookupPlanner(Protocol):
    """Decides the next follow-up lookup from the question and the context so far (None: enough)."""

    def next_lookup(self, question: str, context: str) -> str | None: ...


class WithSystemCells:
    """A memory read with P-Mem's own cells shown (``read --system``): the store it wraps, marked so."""

    def __init__(self, store: Any) -> None:  # a Memory: the store passes itself from one of its parts
        self.store: Memory = store


class Reader:
    """Builds the context for a question from a :class:`~pmem.adapters.service.store.Store`
    (``system``: also P-Mem's own cells, see the module docstring)."""

    def __init__(self, store: Memory | WithSystemCells, *, counter: TokenCounter | None = None,
                 embedder: Embedder | None = None, planner: LookupPlanner | None = None,
                 system: bool = False) -> None:
        self.system = system or isinstance(store, WithSystemCells)
        self.store: Memory = store.store if isinstance(store, WithSystemCells) else store
        self.count = counter or SHARED_COUNTER
        self._embedder = embedder
        self.planner = planner

    def read(self, question: str, *, mode: str = "cells", k: int = DEFAULT_L, budget: int | None = None,
             disclose: Iterable[str] = (), as_of: int | None = None, namespace: str | None = None,
             alternatives: str = "summary", min_trust: int | None = None, hops: int = 0,
             dated: bool = False) -> ReadResult:
        """The context an agent receives for ``question`` (see the module docstring); ``hops``: cells mode
        reads the facts along the paths of the multi-hop policy first (docs/reading.md#multi-hop-reading);
        ``dated``: each cell after the day its current value was observed (turns always show theirs)."""
        if mode not in MODES:
            raise InvalidOperation(f"unknown read mode {mode!r} (expected cells or turns)", field="mode")
        if budget is not None and (isinstance(budget, bool) or budget < 1):
            raise InvalidOperation(f"budget must be a positive number of tokens, got {budget!r}", field="budget")
        policy = Policy(frozenset(m.strip() for m in disclose if m.strip()), alternatives, min_trust, dated)
        if mode == "cells":
            return self.read_cells(question, k=k, budget=budget, policy=policy, as_of=as_of, namespace=namespace,
                                   hops=hops)
        return self.read_turns(question, k=k, budget=budget, as_of=as_of, namespace=namespace, min_trust=min_trust)

    # -- cells ---------------------------------------------------------------
    def read_cells(self, question: str, *, k: int = DEFAULT_L, budget: int | None = None,
                   policy: Policy | None = None, as_of: int | None = None,
                   namespace: str | None = None, hops: int = 0) -> ReadResult:
        policy = policy or Policy()
        keys: list[str] = []
        blocks: list[str] = []
        paths = (self._add_hops(question, hops, keys, blocks, policy, as_of, namespace) if hops
                 else [] if self.planner is not None else None)
        self._add_cells(question, k, keys, blocks, policy, as_of, namespace)
        lookups: list[str] = []
        while self.planner is not None and len(lookups) < MAX_LOOKUPS:
            query = self.planner.next_lookup(question, "\n".join(fit_budget(blocks, budget, self.count)))
            if not query or not query.strip():
                break
            lookups.append(query.strip())
            before = len(keys)
            self._add_cells(query, LOOKUP_CELLS, keys, blocks, policy, as_of, namespace)
            paths = [*(paths or []), f"lookup {lookups[-1]!r} -> {', '.join(keys[before:]) or '(nothing new)'}"]
        kept = fit_budget(blocks, budget, self.count)
        context = "\n".join(kept)
        return ReadResult(question, "cells", context, self.count(context), tuple(keys[:len(kept)]),
                          lookups=tuple(lookups), paths=None if paths is None else tuple(paths))

    def _add_hops(self, question: str, hops: int, keys: list[str], blocks: list[str], policy: Policy,
                  as_of: int | None, namespace: str | None) -> list[str]:
        """Append the facts along the multi-hop policy's paths (best path first); the paths, as text."""
        from pmem.adapters.graph.multihop import hop_read
        from pmem.projections.multihop import fact_line

        found = hop_read(self.store, question, self.embedder, hops=hops, as_of=as_of, namespace=namespace)
        full = policy.disclose or frozenset({"alternatives"})
        for f in found.facts:
            if f.key in keys or (not self.system and is_system_key(f.key)):
                continue
            if policy.disclose or policy.min_trust is not None or policy.dated or f.status == "contested":
                c = self.store.get(f.key, as_of=as_of, disclose=full, namespace=namespace)
                if not readable(c, policy.min_trust):
                    continue
                block = self._block(c, policy, namespace)
            else:
                block = fact_line(f)
            keys.append(f.key)
            blocks.append(block)
        return list(found.paths)

    def _add_cells(self, query: str, n: int, keys: list[str], blocks: list[str], policy: Policy,
                   as_of: int | None, namespace: str | None) -> None:
        """Append the ``n`` best cells for ``query`` not already read (and readable under the policy)."""
        seen = set(keys)
        hits = self.store.search(query, n + len(seen), as_of=as_of, namespace=namespace)
        fresh = [h.cell for h in hits
                 if h.cell.key not in seen and (self.system or not is_system_key(h.cell.key))][:n]
        # Trust lives on the versions: read a cell again with them when it is contested (its claims are
        # marked with source and trust), when a disclosure needs them, or when min_trust must be judged.
        full = policy.disclose or frozenset({"alternatives"})
        fresh = [self.store.get(c.key, as_of=as_of, disclose=full, namespace=namespace)
                 if policy.disclose or policy.min_trust is not None or policy.dated or c.status == "contested" else c
                 for c in fresh]
        for c in fresh:
            if readable(c, policy.min_trust):
                keys.append(c.key)
                blocks.append(self._block(c, policy, namespace))

    def _block(self, cell: CellView, policy: Policy, namespace: str | None) -> str:
        """One cell as the policy renders it (read with its versions when ``policy.dated``)."""
        block = render_cell(cell, policy.disclose, alternatives=policy.alternatives, min_trust=policy.min_trust)
        return with_day(block, self._observed(cell, policy, namespace)) if policy.dated else block

    def _observed(self, cell: CellView, policy: Policy, namespace: str | None) -> str | None:
        """When the cell's current value was observed: the ``observed_at`` of the event that opened its
        head, else the time that event was recorded; None for an empty cell, or a head below ``min_trust``
        (which the line does not show)."""
        if cell.head is None or policy.min_trust is not None and cell.head.trust < policy.min_trust:
            return None
        index = cell.head.opened_at
        found = self.store.log(after=index - 1, limit=1, namespace=namespace)
        if not found or found[0]["event_index"] != index:
            return None
        return found[0].get("observed_at") or found[0].get("recorded_at")

    # -- turns ---------------------------------------------------------------
    def read_turns(self, question: str, *, k: int = DEFAULT_L, budget: int | None = None,
                   as_of: int | None = None, namespace: str | None = None,
                   min_trust: int | None = None) -> ReadResult:
        ranked = self.rank(question, self.turns(as_of=as_of, namespace=namespace, min_trust=min_trust), None)
        kept, pruned = self._pruned_top(question, ranked, k, as_of, namespace)
        blocks = fit_budget([render_turn(t.text, t.source, t.observed_at) for t in kept], budget, self.count)
        context = "\n".join(blocks)
        return ReadResult(question, "turns", context, self.count(context),
                          tuple(str(t.index) for t in kept[:len(blocks)]),
                          pruned=tuple(str(t.index) for t in pruned), gated=bool(pruned) or _gate(question))

    def _pruned_top(self, question: str, ranked: Sequence[Turn], k: int, as_of: int | None,
                    namespace: str | None) -> tuple[list[Turn], list[Turn]]:
        """(kept, pruned) of the best-ranked turns: a pruned turn's place goes to the next turn in rank,
        so pruning replaces stale turns instead of shrinking the context below ``k`` (the turns added
        are pruned in their turn if the list now holds what displaced them). The list doubles at most
        twice: a log of one value restated a thousand times costs three rounds, not a thousand."""
        take = k
        while True:
            top = list(ranked[:take])
            supersedes, current = self._supersedes({c for t in top for c, _, _ in t.wrote()}, as_of, namespace)
            kept, pruned = prune_turns(top, supersedes, question, current)
            if len(kept) >= k or take >= len(ranked) or take >= REFILL_FACTOR * k:
                return kept[:k], pruned
            take *= 2

    def turns(self, *, as_of: int | None = None, namespace: str | None = None,
              min_trust: int | None = None) -> list[Turn]:
        """Every observation of the namespace that carries text, once per distinct text (first arrival),
        with the version it wrote (``vid``) or supported (``target``); below ``min_trust``, none."""
        skip = (lambda key: False) if self.system else (lambda key: key.startswith(ALIAS_PREFIX))
        return collect_turns(self.store.log(namespace=namespace, as_of=as_of), skip_key=skip, min_trust=min_trust)

    def rank(self, question: str, turns: Sequence[Turn], k: int | None) -> list[Turn]:
        """The ``k`` turns (None: all) most similar to the question, best first; a turn is compared as the
        reader sees it, with its date and speaker (a question names the person it asks about)."""
        if not turns:
            return []
        import numpy as np

        emb = self.embedder
        q = emb.embed([question])[0]
        m = emb.embed([render_turn(t.text, t.source, t.observed_at) for t in turns])
        order = np.argsort(-(m @ q), kind="stable")[:k]
        return [turns[int(i)] for i in order]

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = self.store.embedder
        return self._embedder

    def _supersedes(self, cells: set[str], as_of: int | None,
                    namespace: str | None) -> tuple[dict[tuple[str, int], int], set[tuple[str, int]]]:
        """``(cell, vid) -> the vid it displaced``, and the ``(cell, vid)`` of every open version (current)."""
        out: dict[tuple[str, int], int] = {}
        current: set[tuple[str, int]] = set()
        for key in cells:
            for v in self.store.history(key, as_of=as_of, namespace=namespace).versions:
                if v.supersedes is not None:
                    out[(key, v.vid)] = v.supersedes
                if v.status in OPEN:
                    current.add((key, v.vid))
        return out, current


def _gate(question: str) -> bool:
    from pmem.projections.reading import asks_current

    return asks_current(question)
