"""The MCP tools and the history resource of ``pmem mcp``, each described for a model to read.

Imported only when the server starts (the SDK is the ``server`` extra). Every tool hands its arguments to
the caller's :class:`~pmem.adapters.service.guarded.GuardedStore` and answers compact text
(:mod:`.mcp_text`) plus the CLI's JSON shape as structured content.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

import orjson
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp_types import CallToolResult, InputRequiredResult
from pydantic import Field, ValidationError

from pmem.adapters.servers import mcp_text as fmt
from pmem.adapters.servers.mcp_access import (
    HISTORY_URI,
    Access,
    AsOf,
    Key,
    Namespace,
    Operations,
    guarded_call,
    result,
)
from pmem.adapters.service.guarded import GuardedStore
from pmem.domain.errors import PmemError

Disclose = Annotated[list[Literal["history", "alternatives", "support"]] | None, Field(
    description="extra detail: history (earlier values), alternatives (every open claim with trust and "
                "sources), support (the current value's evidence)")]


class Tools:
    """The tools, bound to one server's :class:`Access`."""

    def __init__(self, access: Access) -> None:
        self.access = access

    def remember(self, text: Annotated[str, Field(description="what the user said, as said; facts are "
                                                  "extracted from it (e.g. 'My 5K PB is now 25:50.')")],
                 ctx: Context, trust: Annotated[int | None, Field(ge=0, le=100, description="0-100; capped "
                                                "at the credential's max trust; omitted: the cap")] = None,
                 namespace: Namespace = None) -> CallToolResult:
        """Remember free text: P-Mem extracts the facts it states and records each one (an update keeps the
        old value as superseded). Answers one receipt per fact."""
        record: dict[str, object] = {"text": text} if trust is None else {"text": text, "trust": trust}
        return guarded_call(self.access, ctx, lambda g: _receipts(g.ingest([record], namespace)["receipts"]),
                            write=True)

    def apply(self, operations: Operations, ctx: Context, namespace: Namespace = None) -> CallToolResult:
        """Apply typed operations atomically (all or nothing). Use it for exact changes; use `remember` for
        free text. The source is set from your credential and trust capped at its maximum; receipts say so."""
        self.access.limits.batch_of(operations, "operations")
        return guarded_call(self.access, ctx, lambda g: _receipts(g.apply(operations, namespace)), write=True)

    def get(self, key: Key, ctx: Context, as_of: AsOf = None, disclose: Disclose = None,
            namespace: Namespace = None) -> CallToolResult:
        """One fact by key: its current value, and for a contested one every claim with source and trust."""
        modes = sorted({*(disclose or ()), "alternatives", "support"})

        def work(g: GuardedStore) -> CallToolResult:
            d = g.get(key, namespace, as_of, modes)
            return result(d, fmt.cell(d))

        return guarded_call(self.access, ctx, work, point=True)

    def history(self, key: Key, ctx: Context, as_of: AsOf = None, namespace: Namespace = None) -> CallToolResult:
        """Every version a fact has had, oldest first, with status (active, superseded, contested,
        alternative, revoked, ...), when it opened and closed (event indices), source and trust."""
        return guarded_call(self.access, ctx, lambda g: _shown(g.history(key, namespace, as_of), fmt.history),
                            point=True)

    def search(self, query: Annotated[str, Field(description="words to look for in keys and values")],
               ctx: Context, k: Annotated[int, Field(ge=1, le=100, description="how many facts")] = 5,
               as_of: AsOf = None, namespace: Namespace = None) -> CallToolResult:
        """The facts best matching a query (by meaning and by words), best first, with their current values."""
        self.access.limits.question_of(query, "query")
        self.access.limits.k_of(k)
        return guarded_call(self.access, ctx, lambda g: _shown(g.search(query, namespace, k, as_of), fmt.hits))

    def read(self, question: Annotated[str, Field(description="the user's question")], ctx: Context,
             mode: Annotated[Literal["cells", "turns"], Field(
                 description="cells: the relevant facts, current value first (default); turns: the raw "
                             "things said")] = "cells",
             budget: Annotated[int | None, Field(ge=1, description="cap on the context, in tokens")] = None,
             k: Annotated[int, Field(ge=1, le=100, description="how many facts or turns")] = 12,
             min_trust: Annotated[int | None, Field(ge=0, le=100, description="leave out claims below this "
                                                                              "trust")] = None,
             all_alternatives: Annotated[bool, Field(description="list every competing claim instead of "
                                                                 "counting the lower-trust ones")] = False,
             hops: Annotated[int, Field(ge=0, le=6, description="for a question that chains facts (the capital "
                                                               "of the country of X): follow at least this many "
                                                               "links from the entities it names, one per "
                                                               "relation the question names")] = 0,
             iterative: Annotated[bool, Field(description="let the server's LLM plan up to 3 follow-up "
                                                          "lookups")] = False,
             dated: Annotated[bool, Field(description="cells: each fact after the day its current value was "
                                                      "observed (for questions that ask when)")] = False,
             as_of: AsOf = None, namespace: Namespace = None) -> CallToolResult:
        """The context to answer a question from: the relevant facts, each claim marked with source and
        trust. Call this before answering anything about the user."""
        self.access.limits.question_of(question)
        self.access.limits.k_of(k)
        alternatives = "all" if all_alternatives else "summary"
        return guarded_call(self.access, ctx, lambda g: _shown(
            g.read(question, namespace, mode, budget, as_of, k=k, min_trust=min_trust, alternatives=alternatives,
                   hops=hops, iterative=iterative, dated=dated), _read_text))

    def what_next(self, ctx: Context, k: Annotated[int, Field(ge=1, le=50, description="how many")] = 5,
                  as_of: AsOf = None, namespace: Namespace = None) -> CallToolResult:
        """What to ask the user or read next: the open questions whose prerequisites are known, best first."""
        self.access.limits.k_of(k)
        return guarded_call(self.access, ctx, lambda g: _shown(g.what_next(namespace, k, None, as_of), fmt.proposals))

    def history_resource(self, namespace: str, key: str, ctx: Context) -> str:
        """Every version of one fact (JSON: the shape of `pmem history`)."""
        try:
            return orjson.dumps(self.access.guarded(ctx.headers).history(key, namespace)).decode()
        except PmemError as e:
            raise ResourceError(f"{type(e).__name__}: {e}") from None


def _receipts(rows: list[dict[str, Any]]) -> CallToolResult:
    return result(rows, fmt.receipts(rows))


def _shown(body: Any, render: Callable[[Any], str]) -> CallToolResult:
    return result(body, render(body))


def _read_text(d: dict[str, Any]) -> str:
    """A read as the model sees it: the context, then the multi-hop paths followed, one per line."""
    text = d["context"] or "(nothing relevant remembered)"
    return text + "".join(f"\npath: {p}" for p in d.get("paths", []))


class OneLineErrors(MCPServer[Any]):
    """The SDK's server, with arguments that fail the input schema reported on one line
    (``Error executing tool get: as_of: Input should be greater than or equal to 0``) instead of
    pydantic's several lines and link: the model reads what to correct, and nothing else."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
                        ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as e:
            cause = e.__cause__
            if isinstance(cause, PmemError):  # raised before the store was called (a limit): its one line
                raise ToolError(f"Error executing tool {name}: {type(cause).__name__}: {cause}") from cause
            if not isinstance(cause, ValidationError):
                raise
            problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'arguments'}: {err['msg']}"
                                 for err in cause.errors())
            raise ToolError(f"Error executing tool {name}: {problems}") from cause


def register(server: MCPServer, access: Access) -> None:
    tools = Tools(access)
    for fn in (tools.remember, tools.apply, tools.get, tools.history, tools.search, tools.read, tools.what_next):
        server.add_tool(fn, name=fn.__name__)
    server.resource(HISTORY_URI, name="history", mime_type="application/json",
                    description="every version of one fact, oldest first")(tools.history_resource)
