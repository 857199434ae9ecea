"""PageRank and communities of the entity graph, computed from scratch or carried on from stored ones.

The graph is read as undirected (both edge families, each pair once), as an adjacency in CSR form
(:class:`Adjacency`, numpy), so a re-scoring builds no networkx graph.

Communities: a partition that is a *local optimum of modularity* (resolution 1): no entity gains more
than :data:`EPS` of modularity by moving alone to a neighbour's community, nor loses anything by staying
(:func:`violators` finds those that do). :func:`partition` reaches one from a seed: Louvain (networkx,
seeded, sorted) when there is no stored partition or it misses more than :data:`FRESH_SHARE` of the
entities, else the stored partition with each new entity on its own; then it moves entities one at a
time (:func:`local_moving`) until none gains. So the communities after a change are a function of the
graph and the partition stored before it, and cost what the change disturbs, not the graph.

PageRank: :func:`pagerank` iterates from ``start`` (the stored vector, new entities at 1/n) until an
iteration moves it by less than ``tol`` in L1, so a warm start takes the few iterations a change needs.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np

from pmem.domain.errors import MissingExtra
from pmem.projections.graph import EntityGraph

EPS = 1e-12  # a move must gain more modularity than this: float noise never moves an entity
FRESH_SHARE = 0.2  # more new entities than this share of the graph: Louvain from scratch


@dataclass(frozen=True, slots=True)
class Adjacency:
    """The undirected entity graph: ``nodes`` sorted, node ``i``'s neighbours ``indices[indptr[i]:indptr[i+1]]``."""

    nodes: list[str]
    indptr: Any  # np.ndarray[int64], n + 1
    indices: Any  # np.ndarray[int64], 2 x edges
    pairs: Any  # np.ndarray[int64] (edges, 2), each undirected edge once, a < b, sorted

    @property
    def degree(self) -> Any:
        return np.diff(self.indptr)

    @property
    def edges(self) -> int:
        return len(self.pairs)


def adjacency(g: EntityGraph) -> Adjacency:
    """Entities and both edge families, each unordered pair once, without self-loops (the graph has none)."""
    nodes = sorted(g.entities)  # every edge's ends are entities (build_graph adds them)
    at = {v: i for i, v in enumerate(nodes)}
    flat = chain.from_iterable(chain(g.prerequisites, g.associations))
    ends = np.array(list(map(at.__getitem__, flat)), dtype=np.int64).reshape(-1, 2)
    ends = np.sort(ends[ends[:, 0] != ends[:, 1]], axis=1)
    n = len(nodes)
    pair = np.unique(ends[:, 0] * n + ends[:, 1])  # each unordered pair once, sorted
    ends = np.stack([pair // n, pair % n], axis=1) if n else ends
    src = np.concatenate([ends[:, 0], ends[:, 1]])
    dst = np.concatenate([ends[:, 1], ends[:, 0]])
    order = np.lexsort((dst, src))
    indptr = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=n))]).astype(np.int64)
    return Adjacency(nodes, indptr, dst[order], ends)


def pagerank(adj: Adjacency, start: dict[str, float] | None = None, tol: float = 1e-10) -> Any:
    """PageRank of each node, from ``start`` where given (renormalised; entities it lacks at 1/n), else
    from the uniform vector."""
    n = len(adj.nodes)
    r0 = None
    if start and n:
        r0 = np.array([start.get(v, 1.0 / n) for v in adj.nodes])
        r0 /= r0.sum()
    return power_iteration(n, np.repeat(np.arange(n), adj.degree), adj.indices, r0, tol=tol)


def power_iteration(n: int, src: Any, dst: Any, r0: Any = None, alpha: float = 0.85, tol: float = 1e-10,
                    max_iter: int = 1000) -> Any:
    """PageRank by power iteration over directed entries ``src -> dst`` (an undirected edge both ways): a
    dangling node's rank spreads evenly, teleport is uniform; stopped when an iteration moves the vector
    by less than ``tol`` in L1. From ``r0``, else uniform."""
    if n == 0:
        return np.zeros(0)
    degree = np.bincount(src, minlength=n).astype(float)
    dangling = degree == 0
    safe = np.where(dangling, 1.0, degree)
    r = np.full(n, 1.0 / n) if r0 is None else r0
    for _ in range(max_iter):
        moved = np.bincount(dst, weights=r[src] / safe[src], minlength=n)
        nxt = alpha * moved + (alpha * r[dangling].sum() + 1.0 - alpha) / n
        done = np.abs(nxt - r).sum() < tol
        r = nxt
        if done:
            break
    return r


def partition(adj: Adjacency, seed: dict[str, int] | None = None, louvain_seed: int = 0) -> Any:
    """Each node's community label: from ``seed`` (entity -> stored community) or Louvain, then moved
    entity by entity to a local optimum of modularity."""
    n = len(adj.nodes)
    if not seed or sum(v not in seed for v in adj.nodes) > FRESH_SHARE * n:
        labels = louvain(adj, louvain_seed)
    else:
        labels = np.empty(n, dtype=np.int64)
        fresh = max(seed.values()) + 1  # each new entity alone, under a label no stored community has
        for i, v in enumerate(adj.nodes):
            if v in seed:
                labels[i] = seed[v]
            else:
                labels[i], fresh = fresh, fresh + 1
    polish(adj, labels)
    return labels


def louvain(adj: Adjacency, seed: int) -> Any:
    """networkx's Louvain, fed nodes and edges in sorted order (its seeded result depends on that order);
    communities numbered by their smallest member."""
    nx = networkx()
    nxg = nx.Graph()
    nxg.add_nodes_from(range(len(adj.nodes)))
    nxg.add_edges_from(map(tuple, adj.pairs.tolist()))
    labels = np.zeros(len(adj.nodes), dtype=np.int64)
    if adj.edges:
        for c, members in enumerate(sorted(nx.community.louvain_communities(nxg, seed=seed), key=min)):
            labels[list(members)] = c
    else:
        labels[:] = np.arange(len(adj.nodes))
    return labels


def polish(adj: Adjacency, labels: Any) -> None:
    """Move entities (in place) until no move gains: the global check finds who would, local moving moves
    them and their neighbours; again until the check finds nobody (or nothing moved)."""
    while len(todo := violators(adj, labels)) and local_moving(adj, labels, todo):
        pass


def violators(adj: Adjacency, labels: Any) -> Any:
    """The nodes (indices, ascending) that would gain more than :data:`EPS` by moving to a neighbour's
    community: every directed edge's (node, neighbour's community) counted at once."""
    m = adj.edges
    if m == 0:
        return np.zeros(0, dtype=np.int64)
    n, deg = len(adj.nodes), adj.degree
    comm, dense = np.unique(labels, return_inverse=True)
    totals = np.bincount(dense, weights=deg, minlength=len(comm))
    rows = np.repeat(np.arange(n), deg)
    key, links = np.unique(rows * len(comm) + dense[adj.indices], return_counts=True)
    node, c = key // len(comm), key % len(comm)
    own = c == dense[node]
    total = totals[c] - np.where(own, deg[node], 0)
    gain = links / m - deg[node] * total / (2.0 * m * m)
    stay = -deg * (totals[dense] - deg) / (2.0 * m * m)  # no edge into its own community
    stay[node[own]] = gain[own]
    best = np.full(n, -np.inf)
    np.maximum.at(best, node[~own], gain[~own])
    return np.flatnonzero(best > stay + EPS)


def local_moving(adj: Adjacency, labels: Any, queue: Any) -> int:
    """Louvain's first phase from ``queue`` (node indices): each node goes to the neighbouring community of
    best gain (ties: the smallest label) when that beats staying by more than :data:`EPS`; a moved
    node's neighbours are queued again. Returns the moves made."""
    m = adj.edges
    deg = adj.degree.tolist()
    totals: dict[int, float] = {}
    for lab, d in zip(labels.tolist(), deg, strict=True):
        totals[lab] = totals.get(lab, 0.0) + d
    pending, queued, moves = deque(int(u) for u in queue), {int(u) for u in queue}, 0
    while pending:
        u = pending.popleft()
        queued.discard(u)
        neighbours = adj.indices[adj.indptr[u]:adj.indptr[u + 1]].tolist()
        links: dict[int, int] = {}
        for v in neighbours:
            lab = int(labels[v])
            links[lab] = links.get(lab, 0) + 1
        here, k = int(labels[u]), deg[u]
        totals[here] -= k

        def gain(c: int, k: int = k, links: dict[int, int] = links) -> float:
            return links.get(c, 0) / m - k * totals.get(c, 0.0) / (2.0 * m * m)

        best, best_gain = here, gain(here)
        for c in sorted(links):  # ties: the smallest label, as a better gain must beat the best by EPS
            if c != here and (better := gain(c)) > best_gain + EPS:
                best, best_gain = c, better
        totals[best] = totals.get(best, 0.0) + k
        if best != here:
            labels[u] = best
            moves += 1
            for v in neighbours:
                if v not in queued:
                    pending.append(v)
                    queued.add(v)
    return moves


def analysed(g: EntityGraph, stored: dict[str, tuple[float, int]] | None = None) -> dict[str, tuple[float, int]]:
    """Entity -> (PageRank, community): from scratch, or carried on from ``stored`` (entity -> its stored
    PageRank and community, the warm start and the seed)."""
    adj = adjacency(g)
    if not adj.nodes:
        return {}
    rank = pagerank(adj, None if not stored else {v: pr for v, (pr, _) in stored.items()})
    labels = partition(adj, None if not stored else {v: c for v, (_, c) in stored.items()})
    return {v: (float(r), int(c)) for v, r, c in zip(adj.nodes, rank, labels, strict=True)}


def networkx() -> Any:
    """networkx, imported on first use (the ``graph`` extra); without it, :class:`MissingExtra` naming it."""
    try:
        import networkx
    except ModuleNotFoundError as e:
        if e.name != "networkx":
            raise  # networkx is there but broken: the real cause, not a misleading hint
        raise MissingExtra("networkx", "graph") from None
    return networkx
