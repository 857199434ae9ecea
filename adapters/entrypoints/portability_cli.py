"""``pmem export``, ``import``, ``copy`` and ``backup``: rows of the command table (:mod:`.cli_commands`).
Each opens what it needs itself (:mod:`pmem.adapters.service.portability`); see docs/portability.md."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from typing import Any

from pmem.adapters.entrypoints.cli_common import Args, Command, UsageError, emit, progress


def _add_export(p: argparse.ArgumentParser) -> None:
    p.add_argument("--after", type=int, default=0, help="only the events after this index (not importable)")
    p.add_argument("--output", "-o", default="-", metavar="FILE|-", help="where to write (default: standard output)")


def _export(args: Args) -> int:
    from pmem.adapters.service.portability import export_lines

    namespace = args.namespace if args.namespace_given else None
    lines = export_lines(args.db, after=args.after, namespace=namespace, progress=progress(args))
    if args.output == "-":
        _write(sys.stdout.buffer, lines)
        return 0
    try:
        fh = open(args.output, "xb")
    except FileExistsError:
        raise UsageError(f"export target {args.output} exists: name a new file") from None
    except OSError as e:
        raise UsageError(f"cannot write {args.output}: {e.strerror}") from None
    try:
        with fh:
            _write(fh, lines)
    except BaseException:
        os.unlink(args.output)  # no partial export left behind to be mistaken for a whole one
        raise
    return 0


def _write(out: Any, lines: Iterator[bytes]) -> None:
    for line in lines:
        out.write(line)


def _add_import(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE|-", help="an export (pmem export), or - for standard input")
    p.add_argument("--verify", action="store_true",
                   help="then compare frontier --as-of N of the imported store's projections with a replay of its "
                        "log at sampled N")


def _import(args: Args) -> int:
    from pmem.adapters.service.portability import import_lines, verify_stores

    if args.file == "-":
        out = import_lines(args.db, sys.stdin.buffer, "<stdin>", progress=progress(args))
    else:
        try:
            fh = open(args.file, "rb")
        except OSError as e:
            raise UsageError(f"cannot read {args.file}: {e.strerror}") from None
        with fh:
            out = import_lines(args.db, fh, args.file, progress=progress(args))
    if args.verify:
        out["verified"] = verify_stores(args.db, args.db, source_reader="replay")
    emit(out)
    return 0


def _add_copy(p: argparse.ArgumentParser) -> None:
    p.add_argument("--to", required=True, metavar="URL|FILE",
                   help="the new, empty store: a postgresql:// URL or a SQLite file")
    p.add_argument("--verify", action="store_true",
                   help="then compare frontier --as-of N of the two stores at sampled N")


def _copy(args: Args) -> int:
    from pmem.adapters.service.portability import copy

    emit(copy(args.db, args.to, verify=args.verify, progress=progress(args)))
    return 0


def _add_backup(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", metavar="PATH", help="the new file the copy is written to (it must not exist)")


def _backup(args: Args) -> int:
    from pmem.adapters.service.portability import backup

    emit(backup(args.db, args.path))
    return 0


COMMANDS = (
    Command("export", "the stored events verbatim, with op ids and live data keys (JSON lines; pmem import "
            "reads it)", _add_export, main=_export),
    Command("import", "append an export's events verbatim into an empty store (all or nothing), then rebuild "
            "its projections", _add_import, main=_import),
    Command("copy", "export this store straight into a new, empty one (SQLite to PostgreSQL, say)", _add_copy,
            main=_copy),
    Command("backup", "an online, consistent copy of a SQLite store while writers run (SQLite's backup API)",
            _add_backup, main=_backup),
)
