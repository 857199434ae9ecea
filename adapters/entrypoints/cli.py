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

from pmem.adapters.entrypoints.cli_commands import BY_NAME, COMMANDS
from pmem.adapters.entrypoints.cli_common import (
    Command,
    UsageError,
    check_index,
    embedder,
    json_line,
    progress,
    read_batch,
)
from pmem.adapters.entrypoints.cli_parser import build_parser
from pmem.domain.errors import InvalidOperation, PmemError
from pmem.domain.operations import DEFAULT_NAMESPACE, checked_namespace

__all__ = ["UsageError", "main", "read_batch", "run"]


def _build_parser() -> argparse.ArgumentParser:
    return build_parser(COMMANDS)


def _fail(kind: str, detail: str, code: int) -> int:
    detail = detail.encode("utf-8", "backslashreplace").decode()  # a lone surrogate would stop orjson
    sys.stderr.write(json_line({"error": kind, "detail": detail}).decode())
    return code


def _check_argv(argv: Sequence[str]) -> None:
    """Refuse an argument that is not valid UTF-8 (undecodable bytes reach ``sys.argv`` as lone
    surrogates), naming it: the option it is the value of, else its position."""
    for i, arg in enumerate(argv):
        if not isinstance(arg, str):
            raise UsageError(f"argument {i + 1} must be a string, got {type(arg).__name__}")
        if arg.isascii() or not any("\ud800" <= ch <= "\udfff" for ch in arg):
            continue
        shown = repr(arg.encode("utf-8", "surrogateescape")) if _escaped(arg) else repr(arg)
        option = arg.split("=", 1)[0] if arg.startswith("--") and "=" in arg else (
            argv[i - 1] if i > 0 and _is_option(argv[i - 1]) else None)
        where = f"the value of {option}" if option else f"argument {i + 1}"
        raise UsageError(f"pmem: {where} is not valid UTF-8: {shown}")


def _is_option(arg: str) -> bool:
    """Whether ``arg`` reads as an option name (``-k``, ``--as-of``), not a value such as ``-1`` or ``-``."""
    return arg[:1] == "-" and arg[1:2].isalpha() or arg[:2] == "--" and arg[2:3].isalpha() and "=" not in arg


def _escaped(arg: str) -> bool:
    """Whether every lone surrogate in ``arg`` is an undecodable byte (``surrogateescape``)."""
    return all(not "\ud800" <= ch <= "\udfff" or "\udc80" <= ch <= "\udcff" for ch in arg)


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
    args.namespace_given = getattr(args, "namespace", None) is not None  # export: one namespace, else all
    args.namespace = _namespace(getattr(args, "namespace", None))
    for name in ("as_of", "after", "limit"):
        check_index(f"--{name.replace('_', '-')}", getattr(args, name, None))
    top = BY_NAME[args.command]
    if args.db == ":memory:" and top.name != "demo":
        raise UsageError("--db :memory: keeps nothing once the command ends: give a file or a postgresql:// URL")
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


def _namespace(given: str | None) -> str:
    """``--namespace``, refused when empty or whitespace only (the API refuses ``""`` too); else ``default``."""
    if given is None:
        return DEFAULT_NAMESPACE
    try:
        return checked_namespace(given, "--namespace")
    except InvalidOperation as e:
        raise UsageError(str(e)) from None


def main(argv: Sequence[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    try:
        _check_argv(argv)
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
