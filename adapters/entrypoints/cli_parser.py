"""The ``pmem`` argument parser, built from the command table (:mod:`.cli_commands`): the common options
(accepted before or after the command), then one sub-parser per row, in the table's order."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any, NoReturn

from pmem.adapters.entrypoints.cli_common import Command, UsageError

DESCRIPTION = "P-Mem: an event-sourced memory that keeps what it displaced."


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


def common_options() -> argparse.ArgumentParser:
    """The options of every command. SUPPRESS keeps one given before the command from being reset after it."""
    common = _Parser(add_help=False)
    common.add_argument("--db", default=argparse.SUPPRESS,
                        help="the store: a SQLite file or a postgresql:// URL (default: $PMEM_DB or ./pmem.db)")
    common.add_argument("--namespace", default=argparse.SUPPRESS, help="namespace (default: 'default')")
    common.add_argument("--quiet", "-q", action="store_true", default=argparse.SUPPRESS,
                        help="no progress bars (they are drawn only when stderr is a terminal)")
    common.add_argument("--embedder", default=argparse.SUPPRESS, metavar="onnx|onnx-fp32|hashing|litellm:MODEL",
                        help="what search, read and soft keys embed with (default: $PMEM_EMBEDDER or onnx, the "
                             "offline model; onnx-fp32: the same with float32 products); litellm:MODEL asks an "
                             "OpenAI-compatible server, key from $PMEM_EMBED_KEY")
    common.add_argument("--embedder-base", dest="embedder_base", default=argparse.SUPPRESS, metavar="URL",
                        help="the litellm embedder's server, e.g. http://127.0.0.1:8000/v1 (default: $PMEM_EMBED_BASE)")
    return common


def build_parser(commands: Iterable[Command]) -> argparse.ArgumentParser:
    common = common_options()
    p = _Parser(prog="pmem", parents=[common], description=DESCRIPTION)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for command in commands:
        _add(sub, common, command)
    return p


def _add(sub: Any, common: argparse.ArgumentParser, command: Command) -> None:
    sp = sub.add_parser(command.name, parents=[common], help=command.help)
    if command.add_arguments is not None:
        command.add_arguments(sp)
    if command.subcommands:
        nested = sp.add_subparsers(dest=f"{command.name}_command", metavar="SUBCOMMAND", parser_class=_Parser)
        for c in command.subcommands:
            _add(nested, common, c)
