"""The short way for the two hot reads of the HTTP API: ``GET /v1/cells/{key}`` and ``GET /v1/search``.

An ASGI middleware in front of FastAPI's router. A request to one of these two routes whose query
parameters are all plainly valid and within the server's limits is answered here, by the same
:meth:`.http_runtime.Runtime.serve`
(so through the same :class:`~pmem.adapters.service.guarded.GuardedStore`, which alone enforces the
credential) with the same arguments the FastAPI route would pass. Anything else, and any request this
module is not sure about (a repeated or malformed parameter, a number written other than plainly, an
empty query), goes on to FastAPI unchanged, whose validation then answers it: the short way never
decides what is valid, it only recognises what certainly is.

Why: FastAPI's routing, dependency injection and parameter validation cost a warm server about three
times what ``Store.get`` itself costs (docs/server.md, "Latency"), and these two routes are what
agents call most. The routes stay declared in FastAPI, so OpenAPI describes them as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

from fastapi.security.utils import get_authorization_scheme_param
from starlette.types import ASGIApp, Receive, Scope, Send

from pmem.adapters.servers.http_runtime import Runtime
from pmem.adapters.servers.limits import Limits
from pmem.adapters.service.guarded import GuardedStore
from pmem.domain.operations import MAX_INDEX

Work = Callable[[GuardedStore], Any]

CELLS = "/v1/cells/"
SEARCH = "/v1/search"
RANKINGS = ("hybrid", "vector")


class FastReads:
    """ASGI middleware: the plainly valid hot reads answered without FastAPI's router (see the module)."""

    def __init__(self, app: ASGIApp, runtime: Runtime) -> None:
        self.app, self.runtime = app, runtime

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        hot = scope["type"] == "http" and scope["method"] == "GET"
        work = hot_read(scope, self.runtime.limits) if hot else None
        if work is None:
            await self.app(scope, receive, send)
            return
        response = await self.runtime.serve(bearer_token(scope), work, point=scope["path"].startswith(CELLS))
        await response(scope, receive, send)


def hot_read(scope: Scope, limits: Limits = Limits()) -> Work | None:  # noqa: B008 (frozen: never changed)
    """The store call of a plainly valid ``get`` or ``search`` request within ``limits``, or None (FastAPI
    answers it, naming what is wrong)."""
    path: str = scope["path"]
    if path.startswith(CELLS):
        return _get(path[len(CELLS):], scope)
    if path == SEARCH:
        return _search(scope, limits)
    return None


def _get(key: str, scope: Scope) -> Work | None:
    params = _params(scope, {"as_of", "disclose", "namespace"})
    if params is None or not key or "/" in key:
        return None
    as_of = _number(params.get("as_of"), 0, MAX_INDEX)
    if as_of is False:
        return None
    disclose = [p for p in params.get("disclose", "").split(",") if p]
    namespace = params.get("namespace")
    return lambda g: g.get(key, namespace, as_of, disclose)


def _search(scope: Scope, limits: Limits) -> Work | None:
    params = _params(scope, {"q", "k", "as_of", "ranking", "namespace"})
    if params is None or not params.get("q") or len(params["q"]) > limits.question_chars:
        return None
    q, k, as_of = params["q"], _number(params.get("k"), 1, limits.k), _number(params.get("as_of"), 0, MAX_INDEX)
    ranking = params.get("ranking", "hybrid")
    if k is False or as_of is False or ranking not in RANKINGS:
        return None
    namespace = params.get("namespace")
    return lambda g: g.search(q, namespace, 12 if k is None else k, as_of, ranking=ranking)


def _params(scope: Scope, known: set[str]) -> dict[str, str] | None:
    """The query parameters, or None when one is repeated or not one of ``known`` (FastAPI decides those)."""
    pairs = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
    params = dict(pairs)
    if len(params) != len(pairs) or not params.keys() <= known:
        return None
    return params


def _number(text: str | None, low: int, high: int) -> int | None | bool:
    """``text`` as an integer from ``low`` to ``high``; None when absent; False unless written plainly
    (ASCII digits, no sign, no leading zero) and in range."""
    if text is None:
        return None
    if not (text.isascii() and text.isdigit()) or (len(text) > 1 and text[0] == "0") or len(text) > 20:
        return False
    n = int(text)
    return n if low <= n <= high else False


def bearer_token(scope: Scope) -> str | None:
    """The token of ``Authorization: Bearer TOKEN`` read as FastAPI's ``HTTPBearer`` reads it (the first
    such header; a scheme other than Bearer is no token)."""
    header = next((v for k, v in scope["headers"] if k == b"authorization"), None)
    if header is None:
        return None
    value = header.decode("latin-1")
    scheme, credentials = get_authorization_scheme_param(value)
    if not (value and scheme and credentials) or scheme.lower() != "bearer":
        return None
    return credentials
