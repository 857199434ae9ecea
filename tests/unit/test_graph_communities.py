"""Communities and PageRank carried on from stored ones (adapters/graph/communities.py), against
independent references: networkx's modularity for every single move, and PageRank from scratch."""

from __future__ import annotations

import random

import networkx as nx
import numpy as np
import pytest

from pmem.adapters.graph.communities import FRESH_SHARE, adjacency, pagerank, partition, violators
from pmem.projections.graph import Entity, EntityGraph

SLACK = 1e-9  # what float arithmetic may lose between two ways of summing the same modularity


def random_graph(rng: random.Random, n: int, edges: int) -> EntityGraph:
    g = EntityGraph()
    names = [f"e{i:03d}" for i in range(n)]
    for v in names:
        g.entities[v] = Entity(v, v)
    for _ in range(edges):
        a, b = rng.sample(names, 2)
        (g.prerequisites if rng.random() < 0.5 else g.associations).add((a, b))
    return g


def as_communities(nodes: list[str], labels: np.ndarray) -> list[set[str]]:
    groups: dict[int, set[str]] = {}
    for v, c in zip(nodes, labels.tolist(), strict=True):
        groups.setdefault(c, set()).add(v)
    return list(groups.values())


def best_single_move(g: EntityGraph, communities: list[set[str]]) -> float:
    """The most modularity any one entity gains by joining a neighbour's community (networkx's modularity)."""
    nxg = nx.Graph()
    nxg.add_nodes_from(g.entities)
    nxg.add_edges_from(g.prerequisites | g.associations)
    if nxg.number_of_edges() == 0:
        return 0.0
    base = nx.community.modularity(nxg, communities)
    best = 0.0
    where = {v: i for i, c in enumerate(communities) for v in c}
    for v in nxg:
        for target in {where[u] for u in nxg[v]} - {where[v]}:
            moved = [set(c) - {v} for c in communities]
            moved[target].add(v)
            best = max(best, nx.community.modularity(nxg, [c for c in moved if c]) - base)
    return best


@pytest.mark.parametrize("seed", range(8))
def test_a_partition_from_scratch_is_a_local_optimum_of_modularity(seed: int) -> None:
    g = random_graph(random.Random(seed), 30, 50)
    adj = adjacency(g)
    labels = partition(adj)
    assert best_single_move(g, as_communities(adj.nodes, labels)) <= SLACK
    assert len(violators(adj, labels)) == 0


@pytest.mark.parametrize("seed", range(8))
def test_a_partition_carried_on_after_changes_is_a_local_optimum_and_reproducible(seed: int) -> None:
    rng = random.Random(seed)
    g = random_graph(rng, 40, 70)
    before = adjacency(g)
    stored = dict(zip(before.nodes, partition(before).tolist(), strict=True))
    for i in range(int(FRESH_SHARE * 40) - 1):  # new entities, below the share that starts afresh
        g.entities[f"new{i}"] = Entity(f"new{i}", "new")
        g.associations.add((f"new{i}", rng.choice(before.nodes)))
    for edge in rng.sample(sorted(g.prerequisites), 10):  # and some edges gone
        g.prerequisites.discard(edge)
    adj = adjacency(g)
    labels = partition(adj, stored)
    assert best_single_move(g, as_communities(adj.nodes, labels)) <= SLACK
    assert np.array_equal(labels, partition(adj, stored))  # the same graph and seed: the same partition
    kept = [v for v in adj.nodes if v in stored]
    assert sum(stored[v] == c for v, c in zip(adj.nodes, labels.tolist(), strict=True) if v in stored) > len(kept) / 2


def test_a_seed_missing_too_many_entities_starts_from_louvain() -> None:
    g = random_graph(random.Random(3), 30, 60)
    adj = adjacency(g)
    assert np.array_equal(partition(adj, {adj.nodes[0]: 7}), partition(adj))


@pytest.mark.parametrize("seed", range(6))
def test_pagerank_from_a_stored_vector_equals_pagerank_from_scratch(seed: int) -> None:
    rng = random.Random(seed)
    g = random_graph(rng, 60, 120)
    old = adjacency(g)
    stored = dict(zip(old.nodes, pagerank(old).tolist(), strict=True))
    for _ in range(5):
        g.associations.add(tuple(rng.sample(sorted(g.entities), 2)))  # type: ignore[arg-type]
    g.entities["late"] = Entity("late", "late")
    adj = adjacency(g)
    warm, cold = pagerank(adj, stored), pagerank(adj)
    assert np.abs(warm - cold).max() < 1e-8
    assert abs(warm.sum() - 1.0) < 1e-9
