"""Node types of the MOSAIC-style graph (docs/graph.md): ``event``, ``persona`` or ``relationship``.

An extractor supplies a type with each fact and it travels on the event (``node_type``); where none
is supplied (an older event, a plain ``accept`` without one), :func:`default_node_type` decides from
the fact's relation name. One entity gets the strongest type among its facts, in the order of
:data:`NODE_TYPES`: a person with one ``spouse`` fact is a ``relationship`` node.
"""

from __future__ import annotations

from collections.abc import Iterable

NODE_TYPES = ("relationship", "event", "persona")
"""Every node type, strongest first (the order an entity's facts' types are combined in)."""

_RELATIONSHIP = ("spouse", "married", "father", "mother", "child", "sibling", "member", "employer", "works_for",
                 "author", "founder", "founded", "creator", "head", "chair", "ceo", "director", "manufacturer",
                 "owner", "citizen", "team", "league", "sport", "affiliation")
_EVENT = ("born", "birth", "died", "death", "date", "year", "when", "event", "location", "moved", "created")


def default_node_type(relation: str) -> str:
    """The rule-based type of one fact, from its relation name (``spouse`` -> ``relationship``)."""
    if any(w in relation for w in _RELATIONSHIP):
        return "relationship"
    if any(w in relation for w in _EVENT):
        return "event"
    return "persona"


def strongest(types: Iterable[str]) -> str:
    """The type of an entity whose facts have ``types``: the first of :data:`NODE_TYPES` among them,
    ``persona`` when there are none (an entity known only as some fact's value)."""
    found = set(types)
    return next((t for t in NODE_TYPES if t in found), "persona")


def node_type_problem(raw: object) -> str | None:
    """Why ``raw`` is not a node type, or ``None`` when it is one."""
    if raw in NODE_TYPES:
        return None
    return f"'node_type' must be one of {', '.join(sorted(NODE_TYPES))}, got {raw!r}"[:200]
