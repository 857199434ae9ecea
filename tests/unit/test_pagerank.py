"""PageRank over the edge list (adapters/graph/view.py) against networkx's dense Google matrix, the
iteration it replaces (that matrix costs n x n memory: gigabytes at 10,000 entities)."""

from __future__ import annotations

import random

import networkx as nx
import numpy as np
import pytest

from pmem.adapters.graph.view import pagerank


def dense(g: nx.Graph, alpha: float = 0.85) -> dict[str, float]:
    nodes = list(g)
    m = nx.google_matrix(g, alpha=alpha, nodelist=nodes)
    r = np.full(len(nodes), 1.0 / len(nodes))
    for _ in range(200):
        nxt = r @ m
        if np.abs(nxt - r).sum() < 1e-10:
            r = nxt
            break
        r = nxt
    return {v: float(x) for v, x in zip(nodes, r, strict=True)}


@pytest.mark.parametrize("seed", range(6))
def test_the_edge_list_pagerank_is_the_google_matrix_one(seed: int) -> None:
    rng = random.Random(seed)
    g = nx.Graph()
    g.add_nodes_from(f"n{i}" for i in range(rng.randrange(1, 80)))  # isolated (dangling) nodes too
    nodes = list(g)
    for _ in range(rng.randrange(0, 150)):
        g.add_edge(rng.choice(nodes), rng.choice(nodes))  # self-loops too
    got, want = pagerank(g), dense(g)
    assert got.keys() == want.keys()
    assert max(abs(got[v] - want[v]) for v in want) < 1e-9
    assert abs(sum(got.values()) - 1.0) < 1e-9


def test_an_empty_graph_has_no_ranks() -> None:
    assert pagerank(nx.Graph()) == {}
