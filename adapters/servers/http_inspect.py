"""The routes the memory inspector (``/ui``, docs/inspector.md) reads beyond the rest of the API, under
``/v1/inspect/``: a cell's events, what changed between two event indices, the filtered frontier and a
graph neighbourhood. Each takes the same bearer token and ``namespace`` as every other route and goes
through :meth:`~pmem.adapters.service.guarded.GuardedStore.inspection`, so the credential's rules apply
unchanged; each is read-only, so a read-only token is enough for the whole page.

Like :mod:`.http_routes`, this module imports FastAPI at its top and keeps real annotations.
"""

from typing import Annotated

from fastapi import FastAPI, Query, Response

from pmem.adapters.servers.http_routes import AsOf, Key, Namespace, Token
from pmem.adapters.servers.http_runtime import Runtime
from pmem.adapters.service.guarded import DEFAULT_PAGE, MAX_PAGE
from pmem.adapters.service.inspecting import KEPT, MAX_DEPTH
from pmem.domain.operations import MAX_INDEX

Index = Annotated[int, Query(ge=0, le=MAX_INDEX, description="an event index")]
Since = Annotated[int | None, Query(ge=0, le=MAX_INDEX, description="only cells whose head changed after this "
                                                                      "event index")]
Limit = Annotated[int, Query(ge=1, le=MAX_PAGE)]


def install(app: FastAPI, rt: Runtime) -> None:
    """The inspector's routes on ``app``, over the process's runtime ``rt``."""

    @app.get("/v1/inspect/summary", summary="the namespace and the newest event index (the inspector's clock)")
    async def summary(namespace: Namespace = None, auth: Token = None) -> Response:
        return await rt.serve(auth, lambda g: g.inspection(namespace).summary())

    @app.get("/v1/inspect/cells/{key}/events", summary="every event of one cell: op requested, applied, reason")
    async def events(key: Key, as_of: AsOf = None, namespace: Namespace = None, auth: Token = None) -> Response:
        return await rt.serve(auth, lambda g: g.inspection(namespace).cell_events(key, as_of))

    @app.get("/v1/inspect/changes", summary="cells whose head differs between event `since` and `until`")
    async def changes(since: Index, until: AsOf = None, limit: Limit = DEFAULT_PAGE, namespace: Namespace = None,
                      auth: Token = None) -> Response:
        rt.limits.limit_of(limit)
        return await rt.serve(auth, lambda g: g.inspection(namespace).changes(since, until, limit))

    @app.get("/v1/inspect/frontier", summary="one page of the frontier: contested only, changed since, node type")
    async def frontier(as_of: AsOf = None, contested: bool = False, since: Since = None,
                       node_type: Annotated[str | None, Query(pattern="^(relationship|event|persona)$")] = None,
                       cursor: Annotated[str | None, Query(description="next_cursor of the page before")] = None,
                       limit: Limit = DEFAULT_PAGE, namespace: Namespace = None, auth: Token = None) -> Response:
        rt.limits.limit_of(limit)
        return await rt.serve(auth, lambda g: g.inspection(namespace).frontier(
            as_of, contested=contested, since=since, node_type=node_type, cursor=cursor, limit=limit))

    @app.get("/v1/inspect/neighbourhood", summary="entities within `depth` hops of a cell or entity, and edges")
    async def neighbourhood(of: Annotated[str, Query(min_length=1, description="a cell's key or an entity")],
                            as_of: AsOf = None, depth: Annotated[int, Query(ge=1, le=MAX_DEPTH)] = 1,
                            namespace: Namespace = None, auth: Token = None) -> Response:
        return await rt.serve(auth, lambda g: g.inspection(namespace).neighbourhood(of, as_of, depth))

    @app.get("/v1/inspect/next", summary="what_next's best questions, from the stored scores")
    async def what_next(k: Annotated[int, Query(ge=1, le=KEPT)] = 5, as_of: AsOf = None,
                        namespace: Namespace = None, auth: Token = None) -> Response:
        rt.limits.k_of(k)
        return await rt.serve(auth, lambda g: g.what_next(namespace, k, None, as_of))
