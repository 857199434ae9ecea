"""What one HTTP server process keeps (:class:`Runtime`: its store, the store's credentials, the lock its
calls take) and how answers and errors become JSON responses (the CLI's ``{"error", "detail"}``, with the
status :func:`status_of` gives)."""

from __future__ import annotations

import gc
import json
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from pmem.adapters.service.credentials import Credentials
from pmem.adapters.service.guarded import GuardedStore
from pmem.domain.errors import (
    ConflictRetriesExhausted,
    Forbidden,
    MissingExtra,
    PmemError,
    RetryConflict,
    StoreError,
    StoreUnavailable,
    Unauthorized,
)

if TYPE_CHECKING:
    from fastapi import Response

    from pmem.adapters.service.store import Store

log = logging.getLogger("pmem.server")

# Requests after which a server process counts as warm: its vector index, open-version sets and caches
# are loaded, and what is alive then is moved out of the cyclic collector's reach (``gc.freeze``): a full
# collection would otherwise rescan all of them, stalling every request queued behind it; after the
# freeze the collector scans only what later requests create (docs/server.md, "Latency").
WARM_REQUESTS = 100


def status_of(e: PmemError) -> int:
    """The HTTP status of an error P-Mem raised on purpose."""
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
    """What one server process keeps: its store, the store's credentials, and the lock its calls take."""

    def __init__(self, db: str, *, insecure_local: bool, settings: dict[str, Any] | None = None) -> None:
        self.db, self.insecure_local, self.settings = db, insecure_local, settings or {}
        self.store: Store | None = None
        self.credentials: Credentials | None = None
        self.lock = threading.Lock()
        self.answered = 0  # requests answered, until the process is warm

    def open(self) -> None:
        from pmem.adapters.service.store import Store

        self.store = Store(self.db, **self.settings)
        self.credentials = Credentials(self.store.projection_db)

    def close(self) -> None:
        if self.store is not None:
            self.store.close()

    def guarded(self, token: str | None) -> GuardedStore:
        """The store as ``token`` may use it (anything, on an ``--insecure-local`` server)."""
        if self.store is None or self.credentials is None:
            raise StoreUnavailable("the server's store is not open")
        if self.insecure_local:
            return GuardedStore(self.store, None)
        return GuardedStore(self.store, self.credentials.authenticate(token))

    def answer(self, token: str | None, work: Callable[[GuardedStore], Any]) -> Response:
        """Run ``work`` on the guarded store under the lock; its result as JSON, or the error's JSON."""
        try:
            with self.lock:
                response = json_response(work(self.guarded(token)))
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
    if isinstance(e, ConflictRetriesExhausted):
        headers = {"Retry-After": "1"}
    return json_response({"error": e.kind, "detail": detail}, status, headers)
