"""The one list of projection names: what ``rebuild --projection``, ``worker --projection``, ``stats`` and
the Python API accept. Names only, so the CLI can check an argument before anything heavy loads; the
classes behind them are in :mod:`.sqlite_projection` (frontier, graph, lexical) and :mod:`.vector_projection`."""

from __future__ import annotations

FRONTIER = "frontier"
GRAPH = "graph"
VECTORS = "vectors"
LEXICAL = "lexical"
PROJECTION_NAMES = (FRONTIER, GRAPH, VECTORS, LEXICAL)
ALL = "all"


def projection_problem(name: object) -> str | None:
    """Why ``name`` is not a projection (or ``all``), or None when it is one."""
    if name == ALL or name in PROJECTION_NAMES:
        return None
    return f"unknown projection {name!r} (expected {', '.join(PROJECTION_NAMES)} or all)"


def selected(name: str) -> tuple[str, ...]:
    """The projections ``name`` stands for (one, or every one for ``all``)."""
    return PROJECTION_NAMES if name == ALL else (name,)
