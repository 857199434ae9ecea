"""The MOSAIC-style graph projection (docs/graph.md): fact rows from events, and the entity graph they make.

Pure. :class:`GraphProjector` consumes ``(event_index, event)`` in index order and emits one row per
period during which a cell's head had one value and status (``graph_facts``: open at ``opened_at``,
closed at ``closed_at`` or still open). The graph as of event index N is read from the rows open at
N, so it is rebuildable from the log and readable ``as_of`` like every other projection.

:func:`build_graph` turns those rows into typed entities and two edge families:

- entities: the subject of each key ``<subject>.<relation>`` (the template extractor's keys) and each
  value that is itself a subject, or is the value of a key (so a chain can be followed later);
- entity types (``event``, ``persona``, ``relationship``): each fact has the type its head's evidence
  supplied (the extractor's, carried on the event), else the rule-based one of its relation; an entity
  takes the strongest of its facts' types (:mod:`domain.node_types`);
- prerequisite edges: derived where one fact's value is another fact's subject (``a -> b``: b is
  reached through a), and declared ones, stored in the log as facts under :data:`DECLARED_PREFIX`;
- association edges: two subjects that share a value entity (embedding-cosine association edges
  are added by the adapter, which owns the embedder).

:func:`without_system` leaves out P-Mem's own cells (``_alias.*``), as the store's graph does unless asked.
"""

from __future__ import annotations

import json
import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pmem.domain.keys import normalize_key
from pmem.domain.node_types import default_node_type, strongest
from pmem.domain.state import FORGOTTEN_TEXT, CellState

if TYPE_CHECKING:  # domain.cell imports eventsourcing: reading the tables does not need it
    from pmem.domain.cell import CellEvent

NAME = "graph"
SCHEMA_VERSION = 4  # 2: node_type column; 3: subject and obj columns (the inspector's neighbourhood); 4: next scores
DECLARED_PREFIX = "requires."  # key of a declared prerequisite; value: JSON ["before key", "after key"]
Row = tuple[Any, ...]
COLUMNS: dict[str, type] = {"cell_id": str, "namespace": str, "key": str, "value": str, "status": str,
                            "trust": int, "node_type": str, "opened_at": int, "closed_at": int,
                            "subject": str, "obj": str}
OPENED, CLOSED = 7, 8  # positions of opened_at and closed_at in a row
# ``subject`` (the key's subject) and ``obj`` (the value's entity slug) let a reader fetch the rows at a
# few entities (the adapter's ``graph_around``) instead of building the whole graph.
PK = ("cell_id", "opened_at")


def entity_slug(text: str) -> str:
    """The slug an entity gets, the same as the template extractor's subject slug."""
    folded = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return normalize_key(folded.replace(".", " "))


def split_key(key: str) -> tuple[str, str]:
    """``subject.relation`` -> ``(subject, relation)``; a key without a dot is its own subject."""
    subject, _, relation = key.partition(".")
    return subject, relation or "value"


@dataclass(slots=True)
class GraphProjector:
    """Events -> ``graph_facts`` rows. Cells it has not seen are seeded by the adapter first."""

    cells: dict[str, CellState] = field(default_factory=dict)
    open_rows: dict[str, Row] = field(default_factory=dict)  # cell_id -> the row still open
    changes: dict[tuple[str, int], Row] = field(default_factory=dict)
    evicted: bool = False  # cells were let go (flush) since the last forget: one not held may have a past

    def seed(self, cid: str, state: CellState, open_row: Row | None) -> None:
        self.cells[cid] = state
        if open_row is not None:
            self.open_rows[cid] = open_row

    def forget(self) -> None:
        self.cells.clear()
        self.open_rows.clear()
        self.changes.clear()
        self.evicted = False

    def apply(self, index: int, event: CellEvent) -> None:
        """Apply one event; close and open rows when the head's value or status changed."""
        cid = event.originator_id.hex
        state = self.cells.get(cid)
        if state is None:
            state = self.cells[cid] = CellState(event.namespace, event.key)
        event.apply_to(state)
        head = state.head
        now = None if head is None else (head.value, head.status, head.trust, head.node_type)
        row = self.open_rows.get(cid)
        if row is not None and row[3:OPENED] == now:
            return
        if row is not None:
            self._put((*row[:CLOSED], index, *row[CLOSED + 1:]))
            del self.open_rows[cid]
        if head is not None:
            new = (cid, state.namespace, state.key, head.value, head.status, head.trust, head.node_type, index, None,
                   split_key(state.key)[0], entity_slug(head.value))
            self.open_rows[cid] = new
            self._put(new)

    def _put(self, row: Row) -> None:
        self.changes[(row[0], row[OPENED])] = row

    def flush(self) -> list[Row]:
        out = list(self.changes.values())
        self.changes.clear()
        if len(self.cells) > 200_000:
            self.cells.clear()
            self.open_rows.clear()
            self.evicted = True
        return out


@dataclass(frozen=True, slots=True)
class Fact:
    """One open fact of the graph: ``subject --relation--> value`` (``obj``: the value's slug).

    ``node_type``: the type the extractor (or the writer) supplied, else the rule-based default."""

    key: str
    subject: str
    relation: str
    value: str
    obj: str
    status: str
    trust: int
    since: int
    node_type: str


@dataclass(slots=True)
class Entity:
    """A node: an entity slug, its display text, its facts and what the graph says about it."""

    slug: str
    text: str
    kind: str = "persona"
    facts: list[Fact] = field(default_factory=list)
    mentions: int = 0  # facts whose value is this entity
    confidence: float = 0.0
    time: int = 0
    embedding: Any = None  # a unit vector of ``text``, set by the adapter that owns the embedder

    @property
    def confirmed(self) -> bool:
        """Known: it has facts of its own and none of them is contested."""
        return bool(self.facts) and all(f.status == "active" for f in self.facts)

    @property
    def importance(self) -> int:
        return len(self.facts) + self.mentions


@dataclass(slots=True)
class EntityGraph:
    """Typed entities with prerequisite and association edges (both as sets of ``(src, dst)``)."""

    entities: dict[str, Entity] = field(default_factory=dict)
    prerequisites: set[tuple[str, str]] = field(default_factory=set)
    associations: set[tuple[str, str]] = field(default_factory=set)

    def requires(self, slug: str) -> set[str]:
        return {a for a, b in self.prerequisites if b == slug}

    def facts(self) -> list[Fact]:
        return [f for e in self.entities.values() for f in e.facts]


def without_system(g: EntityGraph) -> EntityGraph:
    """``g`` without P-Mem's own cells (keys starting with ``_``, such as the soft-identity aliases
    ``_alias.*``): their subject entities (``_alias``), every edge that touches those, the mentions their
    values made, and the value entities only they made. User keys never start with ``_`` (normalisation
    strips it), so a system fact's subject is always a ``_`` entity and no user fact's is."""
    system = {slug for slug in g.entities if slug.startswith("_")}
    if not system:
        return g
    made = Counter(f.obj for slug in system for f in g.entities[slug].facts if f.obj)
    prerequisites = {(a, b) for a, b in g.prerequisites if a not in system and b not in system}
    associations = {(a, b) for a, b in g.associations if a not in system and b not in system}
    linked = {s for edge in prerequisites | associations for s in edge}
    named = _user_values(g, system, made)
    out = EntityGraph(prerequisites=prerequisites, associations=associations)
    for slug, e in g.entities.items():
        mentions = e.mentions - made[slug]
        if slug in system or (slug in made and not e.facts and mentions <= 0 and slug not in linked):
            continue
        text = e.text if slug not in made else named.get(slug, slug.replace("_", " "))
        out.entities[slug] = replace(e, text=text, mentions=mentions, facts=list(e.facts))
    return out


def _user_values(g: EntityGraph, system: set[str], made: Counter[str]) -> dict[str, str]:
    """The text of each entity a system fact named, from the newest user fact naming it."""
    newest: dict[str, Fact] = {}
    for slug, e in g.entities.items():
        if slug in system:
            continue
        for f in e.facts:
            if f.obj in made and (f.obj not in newest or f.since >= newest[f.obj].since):
                newest[f.obj] = f
    return {obj: f.value for obj, f in newest.items()}


def fact_of(key: str, value: str, status: str, trust: int, since: int, node_type: str | None = None) -> Fact:
    """A fact of the graph; with no supplied ``node_type``, the rule-based one of its relation."""
    subject, relation = split_key(key)
    return Fact(key, subject, relation, value, entity_slug(value), status, trust, since,
                node_type or default_node_type(relation))


def build_graph(rows: Iterable[Row]) -> EntityGraph:
    """The entity graph of the open ``graph_facts`` rows ``(key, value, status, trust, opened_at,
    node_type)`` (``node_type`` may be ``None``: the rule decides)."""
    g = EntityGraph()
    declared: list[tuple[str, str]] = []
    for key, value, status, trust, since, supplied in rows:
        if value == FORGOTTEN_TEXT:  # a forgotten cell's past heads link nothing (docs/forgetting.md)
            continue
        if key.startswith(DECLARED_PREFIX):
            declared.extend(_declared(value))
            continue
        f = fact_of(key, value, status, trust, since, supplied)
        subj = g.entities.setdefault(f.subject, Entity(f.subject, f.subject.replace("_", " ")))
        subj.facts.append(f)
        subj.time = max(subj.time, since)
        if f.obj:
            obj = g.entities.setdefault(f.obj, Entity(f.obj, value))
            obj.text = value
            obj.mentions += 1
            obj.time = max(obj.time, since)
    for e in g.entities.values():
        e.kind = strongest(f.node_type for f in e.facts)
        e.confidence = max((min(f.trust, 100) / 100 for f in e.facts), default=0.0)
    _link(g)
    for before, after in declared:
        a, b = split_key(normalize_key(before))[0], split_key(normalize_key(after))[0]
        if a and b and a != b:
            for s in (a, b):
                g.entities.setdefault(s, Entity(s, s.replace("_", " ")))
            g.prerequisites.add((a, b))
    return g


def _link(g: EntityGraph) -> None:
    by_value: dict[str, list[str]] = {}
    for e in g.entities.values():
        for f in e.facts:
            if f.obj and f.obj != f.subject:
                g.prerequisites.add((f.subject, f.obj))  # value -> subject: the multi-hop chain
                by_value.setdefault(f.obj, []).append(f.subject)
    for subjects in by_value.values():
        uniq = sorted(set(subjects))
        for i, a in enumerate(uniq[:50]):
            for b in uniq[i + 1:50]:
                g.associations.add((a, b))  # an entity shared between cells


def _declared(value: str) -> list[tuple[str, str]]:
    try:
        pair = json.loads(value)
    except ValueError:
        return []
    if isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) for x in pair):
        return [(pair[0], pair[1])]
    return []


def prerequisite_key(before: str, after: str) -> str:
    """The key under which "``after`` needs ``before``" is declared: one cell per pair, so a
    declaration is revoked like any fact."""
    import hashlib

    pair = f"{normalize_key(before)}\n{normalize_key(after)}".encode()
    return DECLARED_PREFIX + hashlib.sha1(pair).hexdigest()[:16]
