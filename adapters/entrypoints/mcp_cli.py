"""``pmem mcp``: serve the store to MCP clients (docs/mcp.md), over stdio (the default: the client starts
this command) or streamable HTTP. Its row of the command table of :mod:`.cli_commands`.

Who may call (the same rules as ``pmem serve``):

- stdio: the token is ``--token`` or ``$PMEM_TOKEN``, checked at start and again on every call;
- http: every request sends its own ``Authorization: Bearer`` token (``--token`` is refused there);
- a store with no active credential refuses to serve without ``--insecure-local``, which gives callers
  without a token everything and, over http, binds 127.0.0.1 only; a store with one refuses
  ``--insecure-local``.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from pmem.adapters.entrypoints.cli_common import Args, Command, UsageError, check_number

LOOPBACK = "127.0.0.1"
DEFAULT_PORT = 8766


def _add(p: argparse.ArgumentParser) -> None:
    p.add_argument("--transport", choices=("stdio", "http"), default="stdio",
                   help="stdio (default: the MCP client starts this command) or http (streamable HTTP at /mcp)")
    p.add_argument("--host", default=LOOPBACK, help=f"http: the address to bind (default {LOOPBACK})")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"http: the port (default {DEFAULT_PORT})")
    p.add_argument("--token", help="stdio: the caller's token (default: $PMEM_TOKEN); http: not used, each "
                                   "request sends Authorization: Bearer TOKEN")
    p.add_argument("--insecure-local", dest="insecure_local", action="store_true",
                   help="serve a store without credentials to callers without a token (http: 127.0.0.1 only)")
    from pmem.adapters.servers.limits import add_options

    add_options(p)


def _check(args: Args) -> None:
    check_number("--port", args.port, "a port from 1 to 65535", 1)
    if args.port > 65535:
        raise UsageError(f"--port must be a port from 1 to 65535, got {args.port}")
    if args.transport == "http" and args.token is not None:
        raise UsageError("--token is for stdio: over http each request sends Authorization: Bearer TOKEN")
    if args.transport == "http" and args.insecure_local and args.host != LOOPBACK:
        raise UsageError(f"--insecure-local binds {LOOPBACK} only, not {args.host}")
    _limits(args)


def _limits(args: Args) -> Any:
    """The limits the options give (:mod:`pmem.adapters.servers.limits`); a bad one is a usage error."""
    from pmem.adapters.servers.limits import from_options
    from pmem.domain.errors import InvalidOperation

    try:
        return from_options(args)
    except InvalidOperation as e:
        raise UsageError(str(e)) from None


def _serve(args: Args, store: Any) -> None:
    try:
        import mcp  # noqa: F401  # the server extra: named before anything else happens
    except ImportError:
        from pmem.domain.errors import MissingExtra

        raise MissingExtra("mcp", "server") from None
    from pmem.adapters.servers.mcp_access import Access
    from pmem.adapters.servers.mcp_server import build, run_http, run_stdio

    token = None
    if args.transport == "stdio":
        token = args.token or os.environ.get("PMEM_TOKEN") or None
    access = Access(store, token, args.insecure_local)
    active = access.credentials.any_active()
    if args.insecure_local and active:
        raise UsageError("the store has credentials: --insecure-local is only for a store without any")
    if not active and not args.insecure_local:
        raise UsageError("the store has no active credential: create one (pmem keys add) or give "
                         "--insecure-local to serve on this machine without one")
    if args.transport == "stdio" and token is None and active:
        raise UsageError("a token is required: --token or $PMEM_TOKEN")
    if token is not None:
        access.credentials.authenticate(token)  # a bad token stops the start, not the first call
    access.limits = _limits(args)
    if args.db != ":memory:":  # an in-memory database is one per connection: the calls stay on ``store``
        access.pool = _pool(args, access.limits.connections, access.limits.heavy)
    server = build(store, access)
    try:
        if args.transport == "stdio":
            run_stdio(server)
        else:
            run_http(server, access, args.host, args.port)
    finally:
        if access.pool is not None:
            access.pool.close()


def _pool(args: Args, size: int, heavy: int) -> Any:
    """The stores the tool calls are lent, one each (:mod:`pmem.adapters.servers.store_pool`)."""
    from pmem.adapters.entrypoints.cli_common import embedder
    from pmem.adapters.servers.store_pool import ServedStore, StorePool

    return StorePool(lambda: ServedStore(args.db, namespace=args.namespace, **embedder(args)), size, heavy)


MCP = Command("mcp", "serve the store to MCP clients (stdio, or streamable HTTP): tools remember, apply, get, "
                     "history, search, read, what_next", _add, _serve, _check)
