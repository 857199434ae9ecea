"""``pmem mcp``: P-Mem as an MCP server (the official SDK's ``MCPServer``), over stdio or streamable HTTP.

One process keeps one store warm (its embedder and indexes). The tools (:mod:`.mcp_tools`) find each
caller's credential (:mod:`.mcp_access`) and go through a
:class:`~pmem.adapters.service.guarded.GuardedStore`, where all the policy lives.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pmem.adapters.servers.mcp_access import Access, BearerGate

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from pmem.adapters.service.store import Store

NAME = "pmem"
INSTRUCTIONS = (
    "P-Mem is a memory that keeps what it displaced. Call `read` with the user's question to get the "
    "context to answer from; `remember` to store what the user says; `get`/`history` for one fact "
    "(key) and how it changed; `apply` for exact operations (accept, contest, reject, revoke, resolve, "
    "support). Claims are marked with source and trust: prefer the higher trust.")


def build(store: Store, access: Access) -> MCPServer:
    """The MCP server over ``store``: the tools of :mod:`.mcp_tools` and the history resource."""
    from pmem.adapters.servers.mcp_tools import OneLineErrors, register

    server = OneLineErrors(NAME, instructions=INSTRUCTIONS, log_level="WARNING")
    register(server, access)
    return server


def run_stdio(server: MCPServer) -> None:
    server.run("stdio")


def run_http(server: MCPServer, access: Access, host: str, port: int) -> None:
    """Serve streamable HTTP at ``http://host:port/mcp``; each request authenticated before the SDK sees it."""
    import uvicorn

    app = server.streamable_http_app(stateless_http=True, json_response=True, host=host)
    from pmem.adapters.servers.limits import BodyLimit

    gated = BodyLimit(BearerGate(app, access), access.limits.body_bytes)  # a body over the limit: 413, unread
    uvicorn.run(gated, host=host, port=port, log_level="warning")
