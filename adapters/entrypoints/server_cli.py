"""The server commands of ``pmem``: their rows of the command table of :mod:`.cli_commands`.

- ``pmem keys add --namespace NS [--namespace NS2 ...] --source NAME --max-trust N [--read-only]``: a new
  credential; prints ``{"key_id", "token"}`` once (only the token's hash is kept, in the store).
- ``pmem keys list``: every credential (JSON lines, never a token or hash); ``pmem keys revoke KEY_ID``.
- ``pmem serve [--host 127.0.0.1] [--port 8765] [--workers N] [--insecure-local] [LIMITS]``: the HTTP API
  (:mod:`pmem.adapters.servers.http_api`) until SIGTERM/SIGINT. With no active credential in the store it
  refuses to start unless ``--insecure-local``, which serves without tokens and binds only 127.0.0.1;
  with one, it refuses ``--insecure-local``. ``LIMITS``: ``--max-body``, ``--max-batch``, ``--max-k``,
  ``--max-limit``, ``--max-question``, ``--deadline``, ``--connections`` (:mod:`pmem.adapters.servers.limits`).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from pmem.adapters.entrypoints.cli_common import Args, Command, UsageError, check_number, emit, emit_lines

LOOPBACK = "127.0.0.1"


class _AppendNamespace(argparse.Action):
    """``--namespace`` of ``keys add``, repeatable: the credential's namespaces, in order."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest, None) or []), values])


def _add_keys_add(p: argparse.ArgumentParser) -> None:
    # Every command has the common --namespace (one value); this one's takes several, so its action is
    # swapped in this sub-parser only (the common action object is shared by every command's parser).
    repeatable = _AppendNamespace(["--namespace"], dest="key_namespaces", metavar="NS", required=True,
                                  help="a namespace the key may touch (repeatable; the first is the default)")
    old = p._option_string_actions["--namespace"]
    p._option_string_actions["--namespace"] = repeatable
    p._actions[p._actions.index(old)] = repeatable
    for group in p._action_groups:
        if old in group._group_actions:
            group._group_actions[group._group_actions.index(old)] = repeatable
    p.add_argument("--source", required=True, help="the source every write with this key records")
    p.add_argument("--max-trust", dest="max_trust", type=int, required=True,
                   help="the highest trust a write may claim (0-100); a missing trust means this")
    p.add_argument("--read-only", dest="read_only", action="store_true", help="the key may only read")


def _keys(store: Any) -> Any:
    from pmem.adapters.service.credentials import Credentials

    return Credentials(store.projection_db)


def _keys_add(args: Args, store: Any) -> None:
    cred, token = _keys(store).add(args.key_namespaces, args.source, args.max_trust, args.read_only)
    emit({"key_id": cred.key_id, "token": token, "namespaces": list(cred.namespaces), "source": cred.source,
          "max_trust": cred.max_trust, "read_only": cred.read_only})


def _keys_list(args: Args, store: Any) -> None:
    emit_lines(_keys(store).list())


def _add_keys_revoke(p: argparse.ArgumentParser) -> None:
    p.add_argument("key_id", metavar="KEY_ID")


def _keys_revoke(args: Args, store: Any) -> None:
    emit(_keys(store).revoke(args.key_id))


def _add_serve(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default=LOOPBACK, help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765)")
    p.add_argument("--workers", type=int, default=1,
                   help="server processes, each with its own warm store (default 1)")
    p.add_argument("--insecure-local", dest="insecure_local", action="store_true",
                   help="serve without tokens; only on 127.0.0.1 (for one user's own machine)")
    p.add_argument("--no-heavy-process", dest="heavy_process", action="store_false",
                   help="answer searches, reads and next in the server process itself, not in a child process "
                        "of their own (docs/server.md)")
    from pmem.adapters.servers.limits import add_options

    add_options(p)


def _check_serve(args: Args) -> None:
    check_number("--port", args.port, "a port from 0 to 65535")
    if args.port > 65535:
        raise UsageError(f"--port must be a port from 0 to 65535, got {args.port}")
    check_number("--workers", args.workers, "a positive number of processes", 1)
    if args.insecure_local and args.host != LOOPBACK:
        raise UsageError(f"--insecure-local serves without tokens, so it binds only {LOOPBACK}, not {args.host}")
    _limits(args)


def _limits(args: Args) -> Any:
    """The limits the options give (:mod:`pmem.adapters.servers.limits`); a bad one is a usage error."""
    from pmem.adapters.servers.limits import from_options
    from pmem.domain.errors import InvalidOperation

    try:
        return from_options(args)
    except InvalidOperation as e:
        raise UsageError(str(e)) from None


def _serve(args: Args) -> int:
    """Run the HTTP API until SIGTERM/SIGINT."""
    from pmem.adapters.servers.http_api import ENV_DB, ENV_HEAVY, ENV_INSECURE, FACTORY, create_app, load_fastapi
    from pmem.adapters.servers.limits import ENV_LIMITS
    from pmem.adapters.service.store import Store

    load_fastapi()  # the missing extra is named before anything else happens
    try:
        import uvicorn
    except ImportError:
        from pmem.domain.errors import MissingExtra

        raise MissingExtra("uvicorn", "server") from None
    with Store(args.db, namespace=args.namespace) as store:
        active = _keys(store).any_active()
    if not active and not args.insecure_local:
        raise UsageError("no active credential in the store: create one with `pmem keys add`, or serve "
                         "without tokens on 127.0.0.1 with --insecure-local")
    if active and args.insecure_local:  # callers without a token would get past the store's credentials
        raise UsageError("--insecure-local serves without tokens, but the store has active credentials: "
                         "serve without it (or revoke them)")
    _embedder_env(args)
    from pmem.adapters.servers.http_protocol import NoDelayProtocol

    common = {"host": args.host, "port": args.port, "log_level": "warning", "access_log": False,
              "http": NoDelayProtocol}
    limits = _limits(args)
    heavy = args.heavy_process and args.db != ":memory:"  # (another process could not see that database)
    if args.workers > 1:
        os.environ[ENV_DB], os.environ[ENV_INSECURE] = args.db, "1" if args.insecure_local else "0"
        os.environ[ENV_LIMITS], os.environ[ENV_HEAVY] = limits.to_env(), "1" if heavy else "0"
        uvicorn.run(FACTORY, factory=True, workers=args.workers, **common)
    else:
        uvicorn.run(create_app(args.db, insecure_local=args.insecure_local, limits=limits, heavy_process=heavy),
                    **common)
    return 0


def _embedder_env(args: Args) -> None:
    """``--embedder``/``--embedder-base`` as the environment every server process's store reads."""
    for name, env in (("embedder", "PMEM_EMBEDDER"), ("embedder_base", "PMEM_EMBED_BASE")):
        value = getattr(args, name, None)
        if value is not None:
            os.environ[env] = value
    sys.stdout.flush()


COMMANDS = (
    Command("keys", "credentials for the servers (see: pmem keys add)", subcommands=(
        Command("add", "a new credential; prints its token once", _add_keys_add, _keys_add),
        Command("list", "every credential (JSON lines; no tokens)", None, _keys_list),
        Command("revoke", "revoke a credential at once, in every server process", _add_keys_revoke, _keys_revoke),
    )),
    Command("serve", "the HTTP API over the store until SIGTERM/SIGINT (docs/server.md)", _add_serve,
            main=_serve, check=_check_serve),
)
