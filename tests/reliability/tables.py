"""The rows of a store's projections, to compare a live projection with a rebuild from index 1.

Rows are compared as sorted lists (not sets), so a row written twice shows up as a difference, and
so does a count (support, trust) that a batch applied twice would have bumped twice. The vector
tables count only when they exist; their ids depend on replay order, which a rebuild repeats.
Both backends: the same tables (and the frontier's views over them), read through the store's own
projection database.
"""

from __future__ import annotations

from typing import Any

from pmem.adapters.readmodels.graph_projection import TABLE as GRAPH_TABLE
from pmem.projections.frontier import TABLES, VIEWS

VECTOR_TABLES = ("pmem_vec_versions", "pmem_vec_intervals")


def projection_rows(store: Any, *, vectors: bool = False) -> dict[str, list[tuple[Any, ...]]]:
    conn = store.projection_db
    tables = [*TABLES, *VIEWS, GRAPH_TABLE, *(VECTOR_TABLES if vectors else ())]
    return {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in tables}


def rebuild_vector_tables(store: Any) -> None:
    """Replay the vector tables from index 1 without embedding anything (the tables alone)."""
    from pmem.adapters.readmodels.vector_projection import VectorProjection

    projection = VectorProjection(store.log_store)
    projection.reset()
    projection.catch_up()
