"""Who is calling ``pmem mcp`` (see :mod:`.mcp_server`), and what a tool answers.

Every tool call and resource read finds its caller's credential first (:class:`Access`), then goes
through a
:class:`~pmem.adapters.service.guarded.GuardedStore`, where all the policy lives: namespaces, read-only,
the source and the trust cap. Nothing here decides what a caller may do.

- stdio: the caller is whoever started the process; its token (``--token`` or ``PMEM_TOKEN``) is
  authenticated again on every call, so a revoked token stops working at the next call.
- http: every HTTP request carries its own ``Authorization: Bearer`` token, checked before the SDK sees
  the request (401 otherwise) and again by the tool.
- ``--insecure-local``: no token, no credential (only when the store has no active credential; http then
  binds 127.0.0.1 only).

Bad input is a tool error whose text is the one-line message (``InvalidOperation: ...``), never a traceback.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, Field

from pmem.adapters.service.credentials import Credentials
from pmem.adapters.service.guarded import GuardedStore
from pmem.domain.errors import PmemError, Unauthorized

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


class Operation(BaseModel):
    """One typed operation on a cell (the JSON form of `pmem apply`)."""

    op: Literal["accept", "contest", "reject", "revoke", "resolve", "support"] = Field(
        description="accept: new current value (the old one is kept as superseded); contest: hold a value "
                    "open as an alternative; reject: the current value is wrong (replace it with value, or "
                    "roll back); revoke: retract the current value or an alternative; resolve: settle a "
                    "contested cell on value; support: add evidence to the current value (or to value)")
    key: str = Field(description="the fact's key")
    value: str | None = Field(default=None, description="the value (needed by accept, contest, resolve)")
    trust: int | None = Field(default=None, description="0-100; capped at the credential's max trust; "
                                                        "omitted: the cap")
    text: str | None = Field(default=None, description="the observation itself, as said")
    op_id: str | None = Field(default=None, description="idempotency key: resending it records nothing new")
    observed_at: str | None = Field(default=None, description="ISO-8601 time of the observation")


class Access:
    """Finds the caller's credential for one call: the HTTP request's bearer token, else the process's
    token (stdio), else none (insecure local). Read from the store on every call, never cached."""

    def __init__(self, store: Store, token: str | None, insecure: bool) -> None:
        self.store, self.token, self.insecure = store, token, insecure
        self.credentials = Credentials(store.projection_db)

    def guarded(self, headers: Mapping[str, str] | None) -> GuardedStore:
        token = bearer(headers) if headers is not None else self.token
        if token is None and self.insecure:
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


def guarded_call(access: Access, ctx: Context, work: Callable[[GuardedStore], CallToolResult]) -> CallToolResult:
    """Run ``work`` for the caller; P-Mem's errors become tool errors with their one-line message."""
    from mcp.server.mcpserver.exceptions import ToolError

    try:
        return work(access.guarded(ctx.headers))
    except PmemError as e:
        raise ToolError(f"{type(e).__name__}: {e}") from None


class BearerGate:
    """ASGI: a request without a live token is answered 401 (503 when the credentials cannot be read)
    before the SDK sees it, with a JSON-RPC error whose message is the one-line reason, which MCP
    clients show as the error of the call; the rest go to the SDK's app, which authenticates again per
    tool call. On an ``--insecure-local`` server a request without a token passes."""

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
