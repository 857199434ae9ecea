"""The controller of docs/graph.md: what to ask or read next, with scores cached by what they depend on.

Candidates are the nodes not yet confirmed whose prerequisites are all confirmed. Each scores

    0.5 x importance / max importance over the candidate set + 0.3 x PageRank
    + 0.2 x [same community as the previous pick]

:class:`Controller` keeps every candidate's score in a cache and marks entries dirty by what the
score reads, as the MOSAIC reading guide's audit asks (local invalidation alone is not enough):

- the node itself and its in-neighbourhood (a prerequisite edge or a prerequisite's confirmation
  changes whether it is a candidate at all);
- the candidate set's maximum importance (a distant change, the maximum leaving the set, or a newly
  unlocked maximum rescales every score);
- the previous pick's community (a new pick, or the pick moving community, flips the bonus of the
  candidates in the old and the new community only).

:func:`recompute` is the definition: the same scores from scratch. A test checks they always agree.
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass, field

W_IMPORTANCE, W_CENTRALITY, W_COMMUNITY = 0.5, 0.3, 0.2


@dataclass(slots=True)
class Node:
    importance: float = 1.0
    pagerank: float = 0.0
    community: int = 0
    confirmed: bool = False


def score(importance: float, max_importance: float, pagerank: float, same_community: bool) -> float:
    """One candidate's score (the only place the formula is written)."""
    ratio = importance / max_importance if max_importance > 0 else 0.0
    return W_IMPORTANCE * ratio + W_CENTRALITY * pagerank + W_COMMUNITY * (1.0 if same_community else 0.0)


def recompute(nodes: dict[str, Node], requires: dict[str, set[str]], previous: str | None) -> dict[str, float]:
    """Every candidate's score from scratch (the reference the cache is tested against)."""
    cands = [v for v, n in nodes.items() if not n.confirmed
             and all(nodes[p].confirmed for p in requires.get(v, ()) if p in nodes)]
    top = max((nodes[v].importance for v in cands), default=0.0)
    prev = nodes[previous].community if previous in nodes else None
    return {v: score(nodes[v].importance, top, nodes[v].pagerank, nodes[v].community == prev) for v in cands}


def rank(scores: dict[str, float], k: int) -> list[tuple[str, float]]:
    """The ``k`` best ``(node, score)``, ties broken by node id."""
    return [(v, -s) for s, v in heapq.nsmallest(k, ((-s, v) for v, s in scores.items()))]


@dataclass(slots=True)
class Controller:
    """Nodes, prerequisite edges and the previous pick, with dependency-aware cached scores."""

    nodes: dict[str, Node] = field(default_factory=dict)
    requires: dict[str, set[str]] = field(default_factory=dict)  # node -> its prerequisites
    dependents: dict[str, set[str]] = field(default_factory=dict)  # node -> nodes that require it
    previous: str | None = None
    candidates: set[str] = field(default_factory=set)
    cache: dict[str, float] = field(default_factory=dict)
    dirty: set[str] = field(default_factory=set)
    by_community: dict[int, set[str]] = field(default_factory=dict)  # candidates per community
    _importances: Counter[float] = field(default_factory=Counter)  # over candidates
    _max: float = 0.0
    recomputed: int = 0  # scores computed so far (what the benchmark counts)
    _top: list[tuple[str, float]] | None = None  # the last top-k answer, and its k
    _top_k: int = 0
    _touched: set[str] = field(default_factory=set)  # rescored since the last top-k

    # -- writes ----------------------------------------------------------------
    def upsert(self, v: str, *, importance: float | None = None, pagerank: float | None = None,
               community: int | None = None, confirmed: bool | None = None) -> None:
        """Add node ``v`` or change some of its fields."""
        prev_comm = self._prev_community()  # before ``v`` exists: it may be the previous pick
        n = self.nodes.get(v)
        if n is None:
            n = self.nodes[v] = Node()
        if v in self.candidates:
            self._leave(v)
        if importance is not None:
            n.importance = importance
        if pagerank is not None:
            n.pagerank = pagerank
        if community is not None:
            n.community = community
        confirm_changed = confirmed is not None and confirmed != n.confirmed
        if confirmed is not None:
            n.confirmed = confirmed
        self._settle(v)
        if confirm_changed:
            for d in self.dependents.get(v, ()):
                self._reconsider(d)
        if v == self.previous:
            self._previous_moved(prev_comm)
        self._check_max()

    def add_prerequisite(self, before: str, after: str) -> None:
        """``after`` becomes a candidate only once ``before`` is confirmed."""
        for x in (before, after):
            if x not in self.nodes:
                self.upsert(x)
        self.requires.setdefault(after, set()).add(before)
        self.dependents.setdefault(before, set()).add(after)
        self._reconsider(after)
        self._check_max()

    def remove_prerequisite(self, before: str, after: str) -> None:
        self.requires.get(after, set()).discard(before)
        self.dependents.get(before, set()).discard(after)
        if after in self.nodes:
            self._reconsider(after)
            self._check_max()

    def remove(self, v: str) -> None:
        """Drop node ``v`` and its edges (an entity no longer in the graph)."""
        if v not in self.nodes:
            return
        prev_comm = self._prev_community()
        if v in self.candidates:
            self._leave(v)
        for p in self.requires.pop(v, set()):
            self.dependents.get(p, set()).discard(v)
        dependents = self.dependents.pop(v, set())
        for d in dependents:
            self.requires.get(d, set()).discard(v)
        del self.nodes[v]
        for d in dependents:
            self._reconsider(d)
        if v == self.previous:
            self._previous_moved(prev_comm)
        self._check_max()

    def sync(self, nodes: dict[str, Node], prerequisites: set[tuple[str, str]]) -> int:
        """Become exactly ``nodes`` with ``prerequisites`` (``(before, after)`` pairs), touching only
        what differs, so cached scores survive wherever their inputs did; return the changes made."""
        changes = 0
        for v in sorted(set(self.nodes) - set(nodes)):
            self.remove(v)
            changes += 1
        for v, n in nodes.items():
            if self.nodes.get(v) != n:
                self.upsert(v, importance=n.importance, pagerank=n.pagerank, community=n.community,
                            confirmed=n.confirmed)
                changes += 1
        want = {(a, b) for a, b in prerequisites if a in nodes and b in nodes and a != b}
        have = {(a, b) for b, ps in self.requires.items() for a in ps}
        for a, b in sorted(have - want):
            self.remove_prerequisite(a, b)
        for a, b in sorted(want - have):
            self.add_prerequisite(a, b)
        return changes + len(have ^ want)

    def pick(self, v: str | None) -> None:
        """Record the previous pick (what was asked or read last)."""
        old = self._prev_community()
        self.previous = v
        self._previous_moved(old)

    # -- reads -----------------------------------------------------------------
    def scores(self) -> dict[str, float]:
        """Every candidate's score, refreshing only the dirty entries."""
        prev = self._prev_community()
        for v in self.dirty:
            if v in self.candidates:
                n = self.nodes[v]
                self.cache[v] = score(n.importance, self._max, n.pagerank, n.community == prev)
                self._touched.add(v)
                self.recomputed += 1
        self.dirty.clear()
        return self.cache

    def top(self, k: int) -> list[tuple[str, float]]:
        """The ``k`` best candidates. When every member of the last answer (same ``k``) is still a
        candidate with a score no lower, any better candidate must have been rescored since: only
        those and the old members are ranked. Otherwise every cached score is ranked."""
        self.scores()
        old, touched, self._touched = self._top, self._touched, set()
        if old is not None and k == self._top_k and all(self.cache.get(v, -1.0) >= s for v, s in old):
            pool = {v: self.cache[v] for v, _ in old}
            pool.update((v, self.cache[v]) for v in touched if v in self.cache)
            self._top = rank(pool, k)
        else:
            self._top = rank(self.cache, k)
        self._top_k = k
        return list(self._top)

    # -- bookkeeping -----------------------------------------------------------
    def _is_candidate(self, v: str) -> bool:
        n = self.nodes[v]
        return not n.confirmed and all(self.nodes[p].confirmed for p in self.requires.get(v, ()) if p in self.nodes)

    def _reconsider(self, v: str) -> None:
        if v in self.candidates:
            self._leave(v)
        self._settle(v)

    def _settle(self, v: str) -> None:
        """Enter ``v`` into the candidate set if it qualifies (it is not in it when called)."""
        if self._is_candidate(v):
            n = self.nodes[v]
            self.candidates.add(v)
            self.by_community.setdefault(n.community, set()).add(v)
            self._importances[n.importance] += 1
            self.dirty.add(v)

    def _leave(self, v: str) -> None:
        n = self.nodes[v]
        self.candidates.discard(v)
        self.by_community.get(n.community, set()).discard(v)
        self._importances[n.importance] -= 1
        if self._importances[n.importance] == 0:
            del self._importances[n.importance]
        self.cache.pop(v, None)
        self.dirty.discard(v)

    def _check_max(self) -> None:
        """A changed maximum importance rescales every candidate: all of them become dirty."""
        top = max(self._importances) if self._importances else 0.0
        if top != self._max:
            self._max = top
            self.dirty |= self.candidates

    def _prev_community(self) -> int | None:
        return self.nodes[self.previous].community if self.previous in self.nodes else None

    def _previous_moved(self, old: int | None) -> None:
        new = self._prev_community()
        if new != old:
            for c in (old, new):
                if c is not None:
                    self.dirty |= self.by_community.get(c, set())
