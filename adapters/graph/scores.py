"""The stored scores of ``pmem next``: what the graph projection keeps per entity, and the ranking read from it.

:func:`score_rows` applies the definition to one namespace's graph: PageRank and communities
(:func:`pmem.adapters.graph.communities.analysed`: from scratch, or carried on from the stored ones) and
each candidate's score without the continuity bonus (:func:`pmem.projections.controller.recompute` with no
previous pick). The graph projection's scorer stores these rows after a namespace's facts changed
(docs/graph.md); :func:`ranked` turns the few rows a top-k query returns into proposals, adding the bonus
of the previous pick's community with the same :func:`~pmem.projections.controller.score`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pmem.projections.controller import Node, rank, recompute, score
from pmem.projections.graph import EntityGraph

Stored = dict[str, tuple[float, int]]  # entity -> its stored PageRank and community


@dataclass(frozen=True, slots=True)
class Scored:
    """One entity's row: ``base`` is its score without the bonus, None when it is no candidate. The fields
    after ``entity`` are the graph projection's ``graph_scores`` columns after ``namespace, entity``."""

    entity: str
    importance: float
    pagerank: float
    community: int
    base: float | None
    text: str
    kind: str
    gap: str
    requires: str  # JSON list of its prerequisites


def score_rows(g: EntityGraph, stored: Stored | None = None) -> tuple[dict[str, Scored], float]:
    """Every entity's row, and the candidate set's maximum importance (what each score is scaled by):
    from scratch, or carried on from the ``stored`` PageRank and communities."""
    from pmem.adapters.graph.communities import analysed

    nodes = {v: Node(float(g.entities[v].importance), pr, comm, g.entities[v].confirmed)
             for v, (pr, comm) in analysed(g, stored).items()}
    requires: dict[str, set[str]] = {}
    for a, b in g.prerequisites:
        if a != b:
            requires.setdefault(b, set()).add(a)
    base = recompute(nodes, requires, None)
    top = max((nodes[v].importance for v in base), default=0.0)
    rows = {}
    for v, n in nodes.items():
        e = g.entities[v]
        rows[v] = Scored(v, n.importance, n.pagerank, n.community, base.get(v), e.text, e.kind,
                         "contested" if e.facts else "nothing known about it yet",
                         json.dumps(sorted(requires.get(v, ()))))
    return rows, top


def stored_values(g: EntityGraph, stored: Stored | None = None) -> tuple[dict[str, tuple[Any, ...]], float]:
    """What the graph projection stores (it takes this function, as it may not import this package):
    entity -> its row's values after ``entity``, and the maximum importance."""
    rows, top = score_rows(g, stored)
    return {v: (r.importance, r.pagerank, r.community, r.base, r.text, r.kind, r.gap, r.requires)
            for v, r in rows.items()}, top


def ranked(rows: Iterable[tuple[Any, ...]], k: int, top: float, community: int | None,
           position: int) -> list[dict[str, Any]]:
    """Proposals from stored candidate rows ``(entity, importance, pagerank, community, text, kind, gap,
    requires)``: each scored with the previous pick's ``community`` bonus, the ``k`` best, as of ``position``."""
    by_entity = {r[0]: r for r in rows}
    scores = {v: score(float(r[1]), top, float(r[2]), r[3] == community) for v, r in by_entity.items()}
    return [{"entity": v, "text": by_entity[v][4], "type": by_entity[v][5], "score": round(s, 6),
             "gap": by_entity[v][6], "requires": json.loads(by_entity[v][7]), "as_of": position}
            for v, s in rank(scores, k)]
