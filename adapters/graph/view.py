"""Seeing and scoring the graph: PageRank and Louvain (networkx), cosine association edges, exports.

networkx is imported here, only when a graph command runs. :func:`analyse` gives each entity its
centrality and community; :func:`cosine_associations` adds association edges between entities whose
embeddings (of their text) have cosine >= a threshold; :func:`export` writes the entity graph, or
one cell's provenance subgraph (its versions, their evidence and the edges between them), as JSON,
Graphviz DOT, or one self-contained HTML page with an inline SVG drawing (no script, no network).
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from pmem.adapters.graph.communities import networkx
from pmem.domain.views import History
from pmem.projections.controller import Controller, Node
from pmem.projections.graph import EntityGraph

ASSOCIATION_THRESHOLD = 0.8
FORMATS = ("json", "dot", "html")


@dataclass(frozen=True, slots=True)
class Drawing:
    """A graph to render: nodes ``(id, label, kind)`` and edges ``(src, dst, kind)``."""

    title: str
    nodes: list[tuple[str, str, str]]
    edges: list[tuple[str, str, str]]


def analyse(g: EntityGraph) -> dict[str, tuple[float, int]]:
    """Entity -> (PageRank, community) over both edge families, undirected, from scratch: the definition
    the stored scores are checked against (:mod:`pmem.adapters.graph.communities`)."""
    from pmem.adapters.graph.communities import analysed

    return analysed(g)


def pagerank(nxg: Any, alpha: float = 0.85, tol: float = 1e-10, max_iter: int = 200) -> dict[str, float]:
    """PageRank of a networkx graph by power iteration over its edge list (``nx.pagerank`` would need scipy,
    which P-Mem does not install, and networkx's dense Google matrix costs n x n: gigabytes at 10,000
    entities). The same iteration as that matrix's; a self-loop counts once."""
    import numpy as np

    from pmem.adapters.graph.communities import power_iteration

    nodes = list(nxg)
    at = {v: i for i, v in enumerate(nodes)}
    ends = np.array([(at[a], at[b]) for a, b in nxg.edges()], dtype=np.int64).reshape(-1, 2)
    loops = ends[:, 0] == ends[:, 1]
    src = np.concatenate([ends[:, 0], ends[~loops, 1]])  # an undirected edge both ways, a self-loop once
    dst = np.concatenate([ends[:, 1], ends[~loops, 0]])
    r = power_iteration(len(nodes), src, dst, alpha=alpha, tol=tol, max_iter=max_iter)
    return {v: float(x) for v, x in zip(nodes, r, strict=True)}


def cosine_associations(g: EntityGraph, embedder: Any, threshold: float = ASSOCIATION_THRESHOLD,
                        block: int = 1024) -> int:
    """Embed every entity's text (kept on the entity) and add association edges between entities
    whose embeddings have cosine >= ``threshold``; return how many edges were added. The cosines are
    taken ``block`` rows at a time, so a large graph never holds the whole n x n matrix."""
    slugs = sorted(g.entities)
    if not slugs:
        return 0
    vecs = embedder.embed([g.entities[s].text for s in slugs])
    for s, vec in zip(slugs, vecs, strict=True):
        g.entities[s].embedding = vec
    added = 0
    for start in range(0, len(slugs), block):
        sims = vecs[start:start + block] @ vecs.T
        for i, j in zip(*(sims >= threshold).nonzero(), strict=True):
            a, b = slugs[start + int(i)], slugs[int(j)]
            if a < b and (a, b) not in g.associations:
                g.associations.add((a, b))
                added += 1
    return added


def controller_nodes(g: EntityGraph) -> dict[str, Node]:
    """What the controller reads of each entity: importance, PageRank, community, confirmed."""
    return {slug: Node(float(g.entities[slug].importance), pr, comm, g.entities[slug].confirmed)
            for slug, (pr, comm) in analyse(g).items()}


def controller_for(g: EntityGraph, previous: str | None = None) -> Controller:
    """A controller loaded with the entity graph."""
    c = Controller()
    c.sync(controller_nodes(g), g.prerequisites)
    c.pick(previous)
    return c


class GraphSession:
    """A long-lived controller over a store's graph (for a process that keeps running, e.g. an
    agent loop): each :meth:`next` syncs only the entities and edges that changed since the last one,
    so the cached scores of everything else are reused."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.controller = Controller()
        self.changes = 0  # entity and edge changes applied by the last sync

    def next(self, k: int, previous: str | None = None) -> list[tuple[str, float]]:
        g = self.store.graph(embed=True)
        self.changes = self.controller.sync(controller_nodes(g), g.prerequisites)
        self.controller.pick(previous)
        return self.controller.top(k)


def proposals(g: EntityGraph, k: int, previous: str | None = None) -> list[dict[str, Any]]:
    """The ``k`` best next questions: unconfirmed entities whose prerequisites are known."""
    out = []
    for slug, s in controller_for(g, previous).top(k):
        e = g.entities[slug]
        why = "contested" if e.facts else "nothing known about it yet"
        out.append({"entity": slug, "text": e.text, "type": e.kind, "score": round(s, 6), "gap": why,
                    "requires": sorted(g.requires(slug))})
    return out


def entity_drawing(g: EntityGraph) -> Drawing:
    nodes = [(s, e.text, e.kind) for s, e in sorted(g.entities.items())]
    edges = [(a, b, "prerequisite") for a, b in sorted(g.prerequisites)]
    edges += [(a, b, "association") for a, b in sorted(g.associations)]
    return Drawing("entity graph", nodes, edges)


def provenance_drawing(h: History) -> Drawing:
    """One cell: its versions, the evidence (event indices) behind them, and the edges between them."""
    nodes: list[tuple[str, str, str]] = []
    edges: list[tuple[str, str, str]] = []
    for v in h.versions:
        vid = f"v{v.vid}"
        nodes.append((vid, f"{v.value} ({v.status})", v.status))
        if v.supersedes is not None:
            edges.append((vid, f"v{v.supersedes}", "supersedes"))
        if v.alternative_of is not None:
            edges.append((vid, f"v{v.alternative_of}", "alternative-of"))
        for i, ev in enumerate(v.evidence):
            eid = f"e{ev}"
            src = v.sources[i] if i < len(v.sources) and v.sources[i] else "evidence"
            if all(n[0] != eid for n in nodes):
                nodes.append((eid, f"#{ev} {src}", "evidence"))
            edges.append((vid, eid, "supported-by"))
    return Drawing(f"provenance of {h.key}", nodes, edges)


def export(d: Drawing, fmt: str) -> str | dict[str, Any]:
    if fmt == "json":
        return {"title": d.title, "nodes": [{"id": i, "label": lb, "kind": k} for i, lb, k in d.nodes],
                "edges": [{"src": a, "dst": b, "kind": k} for a, b, k in d.edges]}
    if fmt == "dot":
        return to_dot(d)
    return to_html(d)


def to_dot(d: Drawing) -> str:
    def q(s: str) -> str:
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = [f"digraph {q(d.title)} {{"]
    lines += [f"  {q(i)} [label={q(lb)}, class={q(k)}];" for i, lb, k in d.nodes]
    lines += [f"  {q(a)} -> {q(b)} [label={q(k)}{', style=dashed, dir=none' if k == 'association' else ''}];"
              for a, b, k in d.edges]
    return "\n".join([*lines, "}"]) + "\n"


COLOURS = {"persona": "#4e79a7", "event": "#f28e2b", "relationship": "#59a14f", "evidence": "#bab0ac",
           "active": "#59a14f", "contested": "#edc948", "alternative": "#f28e2b", "superseded": "#9c9c9c",
           "contradicted": "#e15759", "revoked": "#b07aa1"}


SPRING_MAX = 500  # networkx's spring layout switches to scipy's sparse solver at 500 nodes
RING_STEP = 60  # pixels between the rings of a large graph's layout


def to_html(d: Drawing, width: int = 960, height: int = 640) -> str:
    """One self-contained page: an inline SVG laid out here (no script, no external resource)."""
    pos = layout(d)
    if len(d.nodes) >= SPRING_MAX:  # rings: give each ring room for its labels
        width = height = max(width, 2 * RING_STEP * (len(rings(d)) + 1))
    pad = 80

    def xy(n: str) -> tuple[float, float]:
        x, y = pos[n]
        return pad + (x + 1) / 2 * (width - 2 * pad), pad + (y + 1) / 2 * (height - 2 * pad)

    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="{html.escape(d.title)}">',
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="18" refY="5" markerWidth="7" markerHeight="7" '
           'orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>']
    for a, b, k in d.edges:
        (x1, y1), (x2, y2) = xy(a), xy(b)
        style = 'stroke-dasharray="5,4"' if k == "association" else 'marker-end="url(#arrow)"'
        svg.append(f'<line class="edge {k}" x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" '
                   f'stroke="#777" stroke-width="1.4" {style}><title>{html.escape(k)}</title></line>')
    for i, label, kind in d.nodes:
        x, y = xy(i)
        svg.append(f'<g class="node {kind}"><circle cx="{x:.1f}" cy="{y:.1f}" r="9" '
                   f'fill="{COLOURS.get(kind, "#76b7b2")}"/><text x="{x + 12:.1f}" y="{y + 4:.1f}" '
                   f'font-size="12">{html.escape(label)}</text></g>')
    svg.append("</svg>")
    legend = " ".join(f'<span style="color:{c}">&#9679; {k}</span>' for k, c in COLOURS.items()
                      if any(n[2] == k for n in d.nodes))
    return ("<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>" + html.escape(d.title)
            + "</title><style>body{font-family:sans-serif;margin:16px}svg{border:1px solid #ddd}</style>"
            + "</head><body><h1>" + html.escape(d.title) + f"</h1><p>{len(d.nodes)} nodes, {len(d.edges)} edges. "
            + legend + " &middot; arrows: prerequisite / provenance, dashed: association</p>\n"
            + "\n".join(svg) + "\n</body></html>\n")


def layout(d: Drawing) -> dict[str, tuple[float, float]]:
    """Each node's position in [-1, 1]^2, with numpy alone (scipy is not a P-Mem dependency).

    Below :data:`SPRING_MAX` nodes, networkx's force-directed spring layout (its dense solver). From
    there on networkx would need scipy, and a force layout of thousands of labelled nodes is unreadable
    anyway: the nodes go on concentric rings by degree (networkx's shell layout), hubs in the middle."""
    nx = networkx()
    if not d.nodes:
        return {}
    if len(d.nodes) >= SPRING_MAX:
        shells = rings(d)
        pos = nx.shell_layout([n for ring in shells for n in ring], nlist=shells)
    else:
        g = nx.Graph()
        g.add_nodes_from(i for i, _, _ in d.nodes)
        g.add_edges_from((a, b) for a, b, _ in d.edges)
        k = 2.0 / len(d.nodes) ** 0.5  # more room than the default 1/sqrt(n): labels stay readable
        pos = nx.spring_layout(g, k=k, iterations=200, seed=1, method="force")
    return {n: (float(x), float(y)) for n, (x, y) in pos.items()}


def rings(d: Drawing, per_ring: int = 16) -> list[list[str]]:
    """The nodes by degree (most first, then id), cut into rings of ``per_ring`` x the ring's number
    (the first ring is the single busiest node, at the centre): outer rings are longer."""
    degree: dict[str, int] = {i: 0 for i, _, _ in d.nodes}
    for a, b, _ in d.edges:
        for n in (a, b):
            if n in degree:
                degree[n] += 1
    order = sorted(degree, key=lambda n: (-degree[n], n))
    out, at, r = [order[:1]], 1, 1
    while at < len(order):
        out.append(order[at:at + per_ring * r])
        at, r = at + per_ring * r, r + 1
    return out

