"""The HTTP API (``pmem serve``): FastAPI under uvicorn, one warm store per process.

Every route but ``/healthz`` takes ``Authorization: Bearer TOKEN`` (see
:mod:`pmem.adapters.service.credentials`) and a ``namespace`` query parameter (default: the credential's
first), and hands its work to a :class:`~pmem.adapters.service.guarded.GuardedStore`, the one place the
credential's rules are enforced. Bodies and answers are the CLI's JSON shapes; errors are the CLI's
``{"error", "detail"}`` with a status from :func:`status_of`, and an unexpected exception is logged and
answered as a JSON 500 without its traceback.

A pool of stores per process (:mod:`.store_pool`), the first opened when the app starts (the lifespan),
all closed when it stops. Each request runs on a worker thread with a store, and so a database
connection, of its own, within the limits and deadline of :mod:`.limits`; a body over the limit is
refused before it is read (:class:`.limits.BodyLimit`). More throughput comes from more processes
(``--workers``), each with its own warm stores, since the store's state lives in the database.
``pmem serve`` hands searches, reads and ``next`` to a child process of its own (:mod:`.heavy_process`),
so that a cell's reads never wait for them at the GIL.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from pmem.adapters.servers.http_runtime import Runtime, error_response, json_response
from pmem.adapters.servers.limits import ENV_LIMITS, BodyLimit, Limits
from pmem.domain.errors import MissingExtra, PmemError

if TYPE_CHECKING:
    from fastapi import FastAPI, Response

log = logging.getLogger("pmem.server")

ENV_DB = "PMEM_SERVE_DB"  # what the app factory of a --workers N server reads (uvicorn imports it by name)
ENV_INSECURE = "PMEM_SERVE_INSECURE_LOCAL"
ENV_HEAVY = "PMEM_SERVE_HEAVY_PROCESS"
FACTORY = "pmem.adapters.servers.http_api:app_from_env"


def load_fastapi() -> Any:
    """The ``fastapi`` module, or the one-line hint naming the extra."""
    try:
        import fastapi
    except ImportError:
        raise MissingExtra("fastapi", "server") from None
    return fastapi


def create_app(db: str, *, insecure_local: bool = False, settings: dict[str, Any] | None = None,
               fast_reads: bool = True, limits: Limits | None = None, heavy_process: bool = False,
               keep_current: bool = True) -> FastAPI:
    """The app over the store ``db``: opened when the app starts, closed when it stops. ``fast_reads``:
    the hot reads answered in front of FastAPI's router (:mod:`.http_fast`; False only to compare);
    ``heavy_process``: searches and other heavy reads answered by a child process
    (:mod:`.heavy_process`); ``keep_current``: a thread folds every tenant's writes (False in that child)."""
    fastapi = load_fastapi()
    rt = Runtime(db, insecure_local=insecure_local, settings=settings, limits=limits, keep_current=keep_current)
    heavy = None
    if heavy_process:
        from pmem.adapters.servers.heavy_process import HeavyProcess

        heavy = HeavyProcess(heavy_main, db, insecure_local=insecure_local, limits=rt.limits)

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        if heavy is not None:
            heavy.start()  # (it warms up while this process opens its store)
        try:
            rt.open()
            yield
        finally:
            rt.close()
            if heavy is not None:
                await heavy.stop()

    app: FastAPI = fastapi.FastAPI(
        title="P-Mem", version="1", lifespan=lifespan,
        description="P-Mem's HTTP API: typed operations, reads with as_of, search and the context an agent "
                    "reads, under credentials (docs/server.md).")
    app.state.runtime = rt
    _install_errors(app)
    from pmem.adapters.servers import http_routes  # imports fastapi at its top: only once it is known installed

    http_routes.install(app, rt)
    from pmem.adapters.servers import http_inspect, ui  # the memory inspector: its reads, and its page at /ui

    http_inspect.install(app, rt)
    ui.install(app)
    if fast_reads:
        from pmem.adapters.servers.http_fast import FastReads

        app.add_middleware(FastReads, runtime=rt)
    if heavy is not None:
        from pmem.adapters.servers.heavy_process import ForwardHeavy

        app.state.heavy = heavy
        app.add_middleware(ForwardHeavy, heavy=heavy)  # in front of the short way: it would answer searches
    app.add_middleware(BodyLimit, limit=rt.limits.body_bytes)  # the outermost: before anything reads a body
    return app


def app_from_env() -> FastAPI:
    """The app factory uvicorn's worker processes import (``--workers N``): the store from the environment."""
    return create_app(os.environ[ENV_DB], insecure_local=os.environ.get(ENV_INSECURE) == "1",
                      limits=Limits.from_env(os.environ.get(ENV_LIMITS)),
                      heavy_process=os.environ.get(ENV_HEAVY) == "1")


def heavy_main(db: str, insecure_local: bool, limits: str, socket: str, parent: int) -> None:
    """The heavy process of a server (:mod:`.heavy_process`): the same app, less the thread that keeps
    the projections current, which its front runs."""
    from pmem.adapters.servers.heavy_process import run

    run(lambda: create_app(db, insecure_local=insecure_local, limits=Limits.from_env(limits),
                           keep_current=False), socket, parent)


def _install_errors(app: Any) -> None:
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException

    async def invalid(request: Any, exc: RequestValidationError) -> Response:
        errors = exc.errors()
        first = errors[0] if errors else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        detail = f"{where}: {first.get('msg', 'invalid request')}" if where else str(first.get("msg", "invalid"))
        return json_response({"error": "invalid request", "detail": detail}, 400)

    async def http_error(request: Any, exc: HTTPException) -> Response:
        kind = {404: "not found", 405: "method not allowed"}.get(exc.status_code, "http error")
        detail = (f"no route {request.method} {request.url.path}" if exc.status_code == 404 else str(exc.detail))
        return json_response({"error": kind, "detail": detail}, exc.status_code)

    async def pmem_error(request: Any, exc: PmemError) -> Response:
        return error_response(exc)

    async def anything(request: Any, exc: Exception) -> Response:
        log.error("internal error on %s %s", request.method, request.url.path, exc_info=exc)
        return json_response({"error": "internal error", "detail": "an unexpected error; see the server log"}, 500)

    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(PmemError, pmem_error)
    app.add_exception_handler(Exception, anything)
