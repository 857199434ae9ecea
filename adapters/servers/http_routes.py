"""The routes of the HTTP API (:mod:`.http_api` builds the app and installs them).

Every route but ``/healthz`` reads the bearer token and the ``namespace`` query parameter and hands its
work to :meth:`.http_api.Runtime.answer`, which authenticates, enforces the credential through a
:class:`~pmem.adapters.service.guarded.GuardedStore` and turns errors into ``{"error", "detail"}``.

The handlers check the request against the server's limits (:mod:`.limits`: batch, ``k``, ``limit``,
question length), then await :meth:`.http_runtime.Runtime.serve`, which runs the store call on a worker
thread with a store of its own, under the request's deadline. Throughput beyond one core comes from
``--workers``.

FastAPI reads the parameters' ``Annotated`` types when a route is declared, so this module imports
FastAPI at its top and keeps real (not postponed) annotations; :mod:`.http_api` imports it only
once FastAPI is known to be installed.
"""

import inspect
from typing import Annotated, Any

from fastapi import Body, Depends, FastAPI, Path, Query, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import WithJsonSchema

from pmem.adapters.servers.http_runtime import Runtime, json_response
from pmem.adapters.service.guarded import DEFAULT_PAGE, GuardedStore
from pmem.domain.errors import InvalidOperation
from pmem.domain.op_schema import operations_schema
from pmem.domain.operations import MAX_INDEX

_scheme = HTTPBearer(auto_error=False, description="a token from `pmem keys add`")


async def _token(credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_scheme)]) -> str | None:
    return None if credentials is None else credentials.credentials


Token = Annotated[str | None, Depends(_token)]
Namespace = Annotated[str | None, Query(description="the namespace (default: the credential's first)")]
AsOf = Annotated[int | None, Query(ge=0, le=MAX_INDEX, description="read as of this event index")]
Disclose = Annotated[str, Query(description="comma list of history, alternatives, support")]
Key = Annotated[str, Path(description="the cell's key")]
Ops = Annotated[list[dict[str, Any]], Body(description="operations, as the JSON lines of `pmem apply`"),
                WithJsonSchema(operations_schema())]  # the operation structs' schema: each is decoded by it
Records = Annotated[list[str | dict[str, Any]], Body(description="records: strings, or objects as an ingest JSON "
                                                                  "line (text, trust, observed_at, op_id, ...)")]
ReadBody = Annotated[dict[str, Any], Body(examples=[{"question": "where does Ann live?", "mode": "cells",
                                                     "budget": 512, "as_of": None, "k": 12}])]


def install(app: FastAPI, rt: Runtime) -> None:
    """Every route of the API on ``app``, over the process's runtime ``rt``."""
    _writes(app, rt)
    _cells(app, rt)
    _others(app, rt)


def _writes(app: FastAPI, rt: Runtime) -> None:
    @app.post("/v1/ops", summary="apply typed operations atomically; their receipts")
    async def ops(body: Ops, namespace: Namespace = None, auth: Token = None) -> Response:
        rt.limits.batch_of(body, "operations")
        return await rt.serve(auth, lambda g: g.apply(body, namespace), write=True)

    @app.post("/v1/ingest", summary="extract facts from text records and write them; receipts")
    async def ingest(body: Records, namespace: Namespace = None, auth: Token = None) -> Response:
        rt.limits.batch_of(body, "records")
        return await rt.serve(auth, lambda g: g.ingest(body, namespace), write=True)

    @app.post("/v1/read", summary="the context an agent reads for a question (question, mode, budget, as_of)")
    async def read(body: ReadBody, namespace: Namespace = None, auth: Token = None) -> Response:
        if isinstance(body.get("question"), str):
            rt.limits.question_of(body["question"])
        if isinstance(body.get("k"), int):
            rt.limits.k_of(body["k"])
        return await rt.serve(auth, lambda g: g.read(namespace=namespace, **_read_args(body, g)))


def _read_args(body: dict[str, Any], g: GuardedStore) -> dict[str, Any]:
    """The arguments of ``Store.read`` a read body gives: ``question`` and any other it takes by name."""
    if not isinstance(body.get("question"), str):
        raise InvalidOperation("a read needs a string 'question'", field="question")
    accepted = set(inspect.signature(g.store.read).parameters) - {"namespace"}
    unknown = sorted(set(body) - accepted)
    if unknown:
        raise InvalidOperation(f"unknown field {unknown[0]!r} for read (expected {', '.join(sorted(accepted))})",
                               field=unknown[0])
    return {k: v for k, v in body.items() if v is not None or k == "question"}


def _cells(app: FastAPI, rt: Runtime) -> None:
    @app.get("/v1/cells/{key}", summary="one cell, current value first")
    async def get(key: Key, as_of: AsOf = None, disclose: Disclose = "", namespace: Namespace = None,
            auth: Token = None) -> Response:
        return await rt.serve(auth, lambda g: g.get(key, namespace, as_of, _listed(disclose)),
                              point=True)

    @app.get("/v1/cells/{key}/history", summary="every version of a cell")
    async def history(key: Key, as_of: AsOf = None, namespace: Namespace = None, auth: Token = None) -> Response:
        return await rt.serve(auth, lambda g: g.history(key, namespace, as_of), point=True)

    @app.get("/v1/frontier", summary="every non-empty cell by key, one page at a time")
    async def frontier(as_of: AsOf = None,
                 cursor: Annotated[str | None, Query(description="next_cursor of the page before")] = None,
                 limit: Annotated[int, Query(ge=1, le=MAX_INDEX)] = DEFAULT_PAGE, disclose: Disclose = "",
                 namespace: Namespace = None, auth: Token = None) -> Response:
        rt.limits.limit_of(limit)
        return await rt.serve(auth, lambda g: g.frontier(namespace, as_of, cursor, limit, _listed(disclose)))

    @app.get("/v1/search", summary="the cells best matching q")
    async def search(q: Annotated[str, Query(min_length=1)], k: Annotated[int, Query(ge=1, le=MAX_INDEX)] = 12,
                     as_of: AsOf = None,
                     ranking: Annotated[str, Query(pattern="^(hybrid|vector)$",
                                                   description="hybrid (default) or vector (the cosine alone)")]
                     = "hybrid", namespace: Namespace = None, auth: Token = None) -> Response:
        rt.limits.question_of(q, "q")
        rt.limits.k_of(k)
        return await rt.serve(auth, lambda g: g.search(q, namespace, k, as_of, ranking=ranking))


def _others(app: FastAPI, rt: Runtime) -> None:
    @app.get("/v1/log", summary="events of the namespace in index order")
    async def log(after: Annotated[int, Query(ge=0, le=MAX_INDEX)] = 0,
            limit: Annotated[int | None, Query(ge=1, le=MAX_INDEX)] = None,
            namespace: Namespace = None, auth: Token = None) -> Response:
        page = rt.limits.limit if limit is None else rt.limits.limit_of(limit)  # a page at a time: see `after`
        return await rt.serve(auth, lambda g: g.log(namespace, after, page))

    @app.get("/v1/next", summary="what to ask or read next, best first")
    async def what_next(k: Annotated[int, Query(ge=1, le=MAX_INDEX)] = 5,
                        previous: Annotated[str | None, Query()] = None, as_of: AsOf = None,
                        namespace: Namespace = None, auth: Token = None) -> Response:
        rt.limits.k_of(k)
        return await rt.serve(auth, lambda g: g.what_next(namespace, k, previous, as_of))

    @app.get("/v1/graph", summary="the entity graph (format=json)")
    async def graph(format: Annotated[str, Query(pattern="^json$")] = "json",  # noqa: A002 (the parameter's name)
              as_of: AsOf = None, namespace: Namespace = None, auth: Token = None) -> Response:
        return await rt.serve(auth, lambda g: g.graph(namespace, as_of))

    @app.get("/v1/stats", summary="counts, projection positions and lag (the whole store)")
    async def stats(namespace: Namespace = None, auth: Token = None) -> Response:
        return await rt.serve(auth, lambda g: g.stats(namespace))

    @app.get("/healthz", summary="liveness (no token)")
    async def healthz() -> Response:
        return json_response({"status": "ok" if rt.store is not None else "starting"})


def _listed(text: str) -> list[str]:
    return [p for p in text.split(",") if p]
