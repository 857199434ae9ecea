"""What one HTTP server process keeps (:class:`Runtime`: its pool of stores, the limits of a request's
work) and how answers and errors become JSON responses (the CLI's ``{"error", "detail"}``, with the
status :func:`status_of` gives)."""

from __future__ import annotations

import gc
import json
import logging
import threading
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import orjson

from pmem.adapters.servers.keeping_current import KeepCurrent
from pmem.adapters.servers.limits import RETRY_AFTER_S, Deadline, DeadlinePassed, LimitExceeded, Limits
from pmem.adapters.servers.store_pool import ServedStore, StorePool
from pmem.adapters.service.credentials import LocalOpening
from pmem.adapters.service.guarded import GuardedStore
from pmem.domain.errors import (
    ConflictRetriesExhausted,
    Forbidden,
    InvalidOperation,
    MissingExtra,
    PmemError,
    RetryConflict,
    StoreError,
    StoreUnavailable,
    TryAgain,
    Unauthorized,
)

if TYPE_CHECKING:
    from fastapi import Response

log = logging.getLogger("pmem.server")

# Requests after which a server process counts as warm: its vector index, open-version sets and caches
# are loaded, and what is alive then is moved out of the cyclic collector's reach (``gc.freeze``): a full
# collection would otherwise rescan all of them, stalling every request queued behind it; after the
# freeze the collector scans only what later requests create (docs/server.md, "Latency").
WARM_REQUESTS = 100


def status_of(e: PmemError) -> int:
    """The HTTP status of an error P-Mem raised on purpose."""
    if isinstance(e, LimitExceeded):
        return e.status
    if isinstance(e, Unauthorized):
        return 401
    if isinstance(e, Forbidden):
        return 403
    if isinstance(e, RetryConflict):
        return 409
    # Other writers kept winning the same cells: nothing was written and the same batch may be resent
    # (its op ids make that safe), so it is "try again", not a conflict the caller must resolve.
    if isinstance(e, ConflictRetriesExhausted):
        return 503
    if isinstance(e, (StoreError, MissingExtra)):
        return 503
    return 400  # bad input (InvalidOperation and the rest: an unknown projection, a reader not configured)


class Runtime:
    """What one server process keeps: its pool of stores (each request runs on a store of its own, on a
    worker thread), the limits of a request's work and how many requests it has answered."""

    def __init__(self, db: str, *, insecure_local: bool, settings: dict[str, Any] | None = None,
                 limits: Limits | None = None, keep_current: bool = True) -> None:
        self.db, self.insecure_local, self.settings = db, insecure_local, settings or {}
        self.keep_current = keep_current  # False in a heavy process: its front keeps the projections current
        self.limits = limits or Limits()
        # an in-memory database is one per connection: its stores could not share it
        size = 1 if db == ":memory:" else self.limits.connections
        self.pool = StorePool(lambda: ServedStore(self.db, **self.settings), size, self.limits.heavy)
        self.current = KeepCurrent(self.pool.open_shared)  # folds other tenants' writes off the request path
        self.store: ServedStore | None = None  # the first store opened: open while the server is
        self.opening = LocalOpening()  # the --insecure-local opening, shut once a credential exists
        self._counting = threading.Lock()
        self.answered = 0  # requests answered, until the process is warm

    def open(self) -> None:
        self.store = self.pool.start()
        if self.pool.size > 1 and self.keep_current:  # not on an in-memory database, which another store could not see
            self.current.start()

    def close(self) -> None:
        self.current.stop()
        self.pool.close()

    def guarded(self, store: ServedStore, token: str | None) -> GuardedStore:
        """``store`` as ``token`` may use it (anything, to a tokenless caller of an ``--insecure-local``
        server while its store has no active credential)."""
        if token is None and self.insecure_local and self.opening.is_open(store.credentials):
            return GuardedStore(store, None)
        return GuardedStore(store, store.credentials.authenticate(token))

    async def serve(self, token: str | None, work: Callable[[GuardedStore], Any], *, write: bool = False,
                    point: bool = False) -> Response:
        """:meth:`answer` on a worker thread, the event loop free meanwhile. Past the deadline a read is
        answered 503 at once (its thread stops at its next check of the deadline and its answer is
        dropped); a write is awaited, since it checks the deadline itself before it commits and answers
        503 if past it, and then wakes the thread that keeps the projections current. ``point``: a point
        read (a cell, its history), which the pool keeps a store for."""
        import anyio

        deadline = Deadline(self.limits.deadline_s)
        if write:
            try:
                return await anyio.to_thread.run_sync(partial(self.answer, write=True), token, work, deadline)
            finally:
                self.current.nudge()
        with anyio.move_on_after(deadline.left()):
            return await anyio.to_thread.run_sync(self.answer, token, work, deadline, point, abandon_on_cancel=True)
        return error_response(DeadlinePassed(f"the request ran past the deadline of {deadline.seconds:g} s "
                                             "(--deadline)"))

    def answer(self, token: str | None, work: Callable[[GuardedStore], Any], deadline: Deadline | None = None,
               point: bool = False, write: bool = False) -> Response:
        """Run ``work`` on a store of its own; its result as JSON, or the error's JSON."""
        try:
            if self.store is None:
                raise StoreUnavailable("the server's store is not open")
            with self.pool.lend(deadline or Deadline(self.limits.deadline_s), point=point, write=write) as store:
                response = json_response(work(self.guarded(store, token)))
            self._warming()
            return response
        except PmemError as e:
            return error_response(e)
        except Exception:
            log.exception("internal error")
            return json_response({"error": "internal error", "detail": "an unexpected error; see the server log"},
                                 500)

    def _warming(self) -> None:
        """Once, at :data:`WARM_REQUESTS` answers: collect what is garbage, then freeze what is left."""
        if self.answered <= WARM_REQUESTS:
            with self._counting:
                self.answered += 1
                if self.answered == WARM_REQUESTS:
                    gc.collect()
                    gc.freeze()


def json_response(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    from fastapi import Response

    try:
        body = orjson.dumps(obj, default=str, option=orjson.OPT_NON_STR_KEYS)
    except orjson.JSONEncodeError:  # what orjson cannot write (an integer past 64 bits echoed from a body)
        body = json.dumps(obj, default=str).encode()
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def error_response(e: PmemError) -> Response:
    status = status_of(e)
    detail = str(e).encode("utf-8", "backslashreplace").decode()
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    if isinstance(e, (ConflictRetriesExhausted, DeadlinePassed, TryAgain)):
        headers = {"Retry-After": str(RETRY_AFTER_S)}
    body: dict[str, Any] = {"error": e.kind, "detail": detail}
    if isinstance(e, InvalidOperation):  # what a client needs to rebuild the same error: the field, the line
        body.update({k: v for k, v in (("field", e.field), ("line", getattr(e, "line", None))) if v is not None})
    return json_response(body, status, headers)
