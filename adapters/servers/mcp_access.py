"""Who is calling ``pmem mcp`` (see :mod:`.mcp_server`), and what a tool answers.

Every tool call and resource read finds its caller's credential first (:class:`Access`), then goes
through a
:class:`~pmem.adapters.service.guarded.GuardedStore`, where all the policy lives: namespaces, read-only,
the source and the trust cap. Nothing here decides what a caller may do.

- stdio: the caller is whoever started the process; its token (``--token`` or ``PMEM_TOKEN``) is
  authenticated again on every call, so a revoked token stops working at the next call.
- http: every HTTP request carries its own ``Authorization: Bearer`` token, checked before the SDK sees
  the request (401 otherwise) and again by the tool.
- ``--insecure-local``: no token, no credential, while the store has no active credential (re-checked
  per call: once a key is added, a call without a token is :class:`Unauthorized`; http binds 127.0.0.1
  only).

Bad input is a tool error whose text is the one-line message (``InvalidOperation: ...``), never a traceback.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, WithJsonSchema

from pmem.adapters.servers.limits import Deadline, Limits
from pmem.adapters.servers.store_pool import StorePool
from pmem.adapters.service.credentials import Credentials, LocalOpening
from pmem.adapters.service.guarded import GuardedStore
from pmem.domain.errors import PmemError, Unauthorized
from pmem.domain.op_schema import operations_schema

if TYPE_CHECKING:
    from mcp.server.mcpserver import Context
    from mcp_types import CallToolResult

    from pmem.adapters.service.store import Store

HISTORY_URI = "pmem://history/{namespace}/{key}"  # a cell's history as a resource

Namespace = Annotated[str | None, Field(description="namespace to work in (default: the credential's first)")]
AsOf = Annotated[int | None, Field(ge=0, description="read as the memory was after this event index "
                                                     "(time travel); omit for now")]
Key = Annotated[str, Field(description="the fact's key, e.g. 'home city' or 'account.iban' "
                                       "(normalised: case and spaces do not matter)")]


Operations = Annotated[list[dict[str, Any]], Field(min_length=1), WithJsonSchema({
    **operations_schema(), "minItems": 1,
    "description": "the operations, applied in order, all or nothing (the JSON lines of `pmem apply`)"})]
"""The operations of the ``apply`` tool. Their schema is the operation structs' (:mod:`pmem.domain.op_schema`);
the SDK checks only that it is a list of objects, and the store decodes each one into its struct, once."""


class Access:
    """Finds the caller's credential for one call: the HTTP request's bearer token, else the process's
    token (stdio), else none (insecure local). Read from the store on every call, never cached."""

    def __init__(self, store: Store, token: str | None, insecure: bool) -> None:
        self.store, self.token, self.insecure = store, token, insecure
        self.credentials = Credentials(store.projection_db)
        self.opening = LocalOpening()
        self.limits = Limits()  # what one call may ask for, and its deadline (pmem mcp's options)
        self.pool: StorePool | None = None  # stores lent one per tool call (None: every call on ``store``)

    def guarded(self, headers: Mapping[str, str] | None) -> GuardedStore:
        token = bearer(headers) if headers is not None else self.token
        if token is None and self.insecure and self.opening.is_open(self.credentials):
            return GuardedStore(self.store, None)
        return GuardedStore(self.store, self.credentials.authenticate(token))


def bearer(headers: Mapping[str, str]) -> str | None:
    """The token of an ``Authorization: Bearer TOKEN`` header, or None."""
    value = headers.get("authorization") or headers.get("Authorization") or ""
    scheme, _, token = value.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def result(body: Any, rendered: str) -> CallToolResult:
    """A tool result: the compact text and the structured content (a list is wrapped as ``{"result": ...}``)."""
    from mcp_types import CallToolResult, TextContent

    structured = body if isinstance(body, dict) else {"result": body}
    return CallToolResult(content=[TextContent(type="text", text=rendered)], structured_content=structured)


def guarded_call(access: Access, ctx: Context, work: Callable[[GuardedStore], CallToolResult], *,
                 point: bool = False, write: bool = False) -> CallToolResult:
    """Run ``work`` for the caller (``point``: a point read, which the pool keeps a store for; ``write``:
    a write, see :class:`~.store_pool.StorePool`); P-Mem's errors become tool errors with their one-line
    message."""
    from mcp.server.mcpserver.exceptions import ToolError

    try:
        g = access.guarded(ctx.headers)
        if access.pool is None:
            return work(g)
        deadline = Deadline(access.limits.deadline_s)
        # (a write checks the deadline before it commits)
        with access.pool.lend(deadline, point=point, write=write) as store:
            answer = work(GuardedStore(store, g.credential))
        deadline.check("the answer was dropped")  # a read past the deadline answers nothing
        return answer
    except PmemError as e:
        raise ToolError(f"{type(e).__name__}: {e}") from None


class BearerGate:
    """ASGI: a request without a live token is answered 401 (503 when the credentials cannot be read)
    before the SDK sees it, with a JSON-RPC error whose message is the one-line reason, which MCP
    clients show as the error of the call; the rest go to the SDK's app, which authenticates again per
    tool call. On an ``--insecure-local`` server a request without a token passes while the store has no
    active credential."""

    def __init__(self, app: Any, access: Access) -> None:
        self.app, self.access = app, access

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
            try:
                self.access.guarded(headers)
            except Unauthorized as e:
                await _refuse(send, 401, UNAUTHORIZED, f"Unauthorized: {e}")
                return
            except PmemError as e:
                await _refuse(send, 503, UNAVAILABLE, f"{type(e).__name__}: {e}")
                return
        await self.app(scope, receive, send)


UNAUTHORIZED, UNAVAILABLE = -32001, -32002  # JSON-RPC server-defined error codes


async def _refuse(send: Any, status: int, code: int, message: str) -> None:
    import orjson

    body = orjson.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}})
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]})
    await send({"type": "http.response.body", "body": body})
