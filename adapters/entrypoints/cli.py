"""The ``pmem`` command line. A thin layer over :mod:`pmem.adapters.service.store`.

Every command prints JSON on stdout (one object, or JSON lines for lists). Errors print one JSON
object ``{"error": ..., "detail": ...}`` on stderr and exit non-zero: 2 for bad input, 1 when the
store cannot do what was asked. Nothing heavy is imported at start-up.

The commands are rows of a table (:mod:`.cli_commands`, with :mod:`.cli_jobs` and :mod:`.graph_cli`);
:mod:`.cli_parser` builds the parser from it, and :func:`run` checks the input and calls the row.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import orjson

from pmem.adapters.entrypoints.cli_commands import BY_NAME, COMMANDS
from pmem.adapters.entrypoints.cli_common import Command, UsageError, check_index, embedder, progress, read_batch
from pmem.adapters.entrypoints.cli_parser import build_parser
from pmem.domain.errors import InvalidOperation, PmemError

__all__ = ["UsageError", "main", "read_batch", "run"]


def _build_parser() -> argparse.ArgumentParser:
    return build_parser(COMMANDS)


def _fail(kind: str, detail: str, code: int) -> int:
    sys.stderr.write(orjson.dumps({"error": kind, "detail": detail}).decode() + "\n")
    return code


def _chosen(command: Command, args: argparse.Namespace) -> Command:
    """The row to run: ``command`` itself, or its subcommand (``graph export``); one is required."""
    if not command.subcommands:
        return command
    name = getattr(args, f"{command.name}_command")
    if name is None:
        names = ", ".join(c.name for c in command.subcommands)
        raise UsageError(f"pmem {command.name}: a subcommand is required ({names})")
    return next(c for c in command.subcommands if c.name == name)


def run(argv: Sequence[str]) -> int:
    args = _build_parser().parse_args(argv)
    if args.command is None:
        raise UsageError("pmem: a command is required (try pmem --help)")
    args.db = getattr(args, "db", None) or os.environ.get("PMEM_DB") or "pmem.db"
    args.namespace = getattr(args, "namespace", None) or "default"
    for name in ("as_of", "after", "limit"):
        check_index(f"--{name.replace('_', '-')}", getattr(args, name, None))
    top = BY_NAME[args.command]
    if top.check is not None:
        top.check(args)
    command = _chosen(top, args)
    if command is not top and command.check is not None:
        command.check(args)
    if command.main is not None:
        return command.main(args)
    from pmem.adapters.service.store import Store

    with Store(args.db, namespace=args.namespace, progress=progress(args), **embedder(args)) as store:
        if command.handle is not None:
            command.handle(args, store)
    return 0


def main(argv: Sequence[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if any(a in ("-h", "--help") for a in argv):
            _build_parser().parse_args(argv)  # prints help and exits 0 (a bad command: one JSON line)
        code = run(argv)
    except InvalidOperation as e:
        code = _fail(e.kind, str(e), 2)
    except PmemError as e:
        code = _fail(e.kind, str(e), 1)
    except BrokenPipeError:
        code = 0
    except KeyboardInterrupt:
        code = _fail("interrupted", "interrupted", 130)
    except Exception as e:  # a bug, not bad input: still one JSON line, never a traceback
        code = _fail("internal error", f"{type(e).__name__}: {e}", 70)
    sys.stdout.flush()
    raise SystemExit(code)
