"""``Store.graph_around`` (the rows at a few entities of the graph projection) and the inspector's
neighbourhood read through it, against the whole graph (``Store.graph``) as the oracle, on both backends:
the same entities, hops, labels, types, cells and edges, at several ``as_of``, for cells and entities."""

from __future__ import annotations

import random
from collections import deque
from typing import Any

import pmem
from pmem.adapters.service.inspecting import MAX_NODES, Inspection
from pmem.projections.graph import EntityGraph, entity_slug, split_key


def write(store: Any) -> None:
    """Hubs past the 50 subjects an association is drawn among, chains (a value that is a subject),
    revisions and a contest (so ``as_of`` matters), a declared prerequisite and a forgotten cell."""
    rng = random.Random(7)
    ops = []
    for i in range(160):
        ops.append({"op": "accept", "key": f"reader_{i:03d}.favourite_book", "value": f"Book {rng.randrange(12)}"})
        if i % 3 == 0:
            ops.append({"op": "accept", "key": f"reader_{i:03d}.home", "value": f"Town {rng.randrange(20)}"})
    for b in range(12):
        ops.append({"op": "accept", "key": f"book_{b}.author", "value": f"Writer {b % 4}"})
    for w in range(4):
        ops.append({"op": "accept", "key": f"writer_{w}.home", "value": f"Town {w}"})
    store.apply(ops)
    for i in range(0, 160, 7):
        store.accept(f"reader_{i:03d}.favourite_book", f"Book {(i + 5) % 12}")
    store.contest("writer_1.home", "Town 9", source="gossip")
    store.declare_prerequisite("town_3.mayor", "writer_2.home")
    store.forget("reader_006.home")


def oracle(g: EntityGraph, of: str, depth: int) -> dict[str, Any]:
    """The neighbourhood as a breadth-first search over the whole graph finds it."""
    facts = [f for f in g.facts() if f.key == of]
    start = (sorted({s for f in facts for s in (f.subject, f.obj) if s in g.entities}) if facts
             else [s for s in [entity_slug(split_key(of)[0])] if s in g.entities])
    near: dict[str, set[str]] = {}
    for a, b in g.prerequisites | g.associations:
        near.setdefault(a, set()).add(b)
        near.setdefault(b, set()).add(a)
    hops, todo = {s: 0 for s in start}, deque(start)
    while todo and len(hops) < MAX_NODES:
        s = todo.popleft()
        for n in sorted(near.get(s, ())) if hops[s] < depth else ():
            if n not in hops and len(hops) < MAX_NODES:
                hops[n] = hops[s] + 1
                todo.append(n)
    nodes = [(s, g.entities[s].text, g.entities[s].kind, h, sorted(f.key for f in g.entities[s].facts))
             for s, h in hops.items()]
    edges = sorted((a, b) for a, b in g.prerequisites | g.associations if a in hops and b in hops)
    return {"start": start, "nodes": nodes, "edges": edges}


def seen(out: dict[str, Any]) -> dict[str, Any]:
    return {"start": out["start"], "nodes": [(n["id"], n["label"], n["kind"], n["hops"], n["cells"])
                                             for n in out["nodes"]],
            "edges": sorted((e["src"], e["dst"]) for e in out["edges"])}


def test_the_neighbourhood_read_from_a_few_rows_is_the_whole_graphs(db: str) -> None:
    with pmem.open(db, embedder="hashing") as store:
        write(store)
        inspect, last = Inspection(store, "default"), store.last_index()
        starts = ["reader_000.favourite_book", "book_3", "book_3.author", "writer_1.home", "town_3", "writer_2",
                  "reader_007", "town_9", "nobody", "reader_006.home"]
        for as_of in (None, last // 2, last - 3):
            whole = store.graph(as_of=as_of)
            for of in starts:
                for depth in (1, 2, 3):
                    assert seen(inspect.neighbourhood(of, as_of, depth)) == oracle(whole, of, depth), (of, as_of, depth)


def test_graph_around_holds_only_the_rows_at_its_entities_and_forgets_a_forgotten_values_entity(db: str) -> None:
    with pmem.open(db, embedder="hashing") as store:
        write(store)
        whole, part = store.graph(), store.graph_around(["writer_1"])
        assert len(part.entities) < len(whole.entities) / 4
        assert part.entities["writer_1"].facts == whole.entities["writer_1"].facts
        assert {e for e in whole.prerequisites if "writer_1" in e} <= part.prerequisites
        assert "reader_006" not in store.graph_around([f"town_{n}" for n in range(20)]).entities
        left = store.projection_db.execute("SELECT value, obj FROM graph_facts WHERE key=?", ("reader_006.home",))
        assert [tuple(r) for r in left] == [("<forgotten>", None)]  # the value's entity is forgotten too
