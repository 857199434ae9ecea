"""The graph commands of ``pmem``: their rows of the command table of
:mod:`pmem.adapters.entrypoints.cli_commands`, which lists them after ``unmerge``.

- ``pmem next [--k K] [--previous ENTITY] [--as-of N] [--system]``: JSON lines, the best next questions.
- ``pmem require BEFORE AFTER``: declare a prerequisite edge; one receipt.
- ``pmem check KEY VALUE [--confidence C] [--exclusive K=V,K=V]... [--write]``: the pre-write conflict
  check against the 5 nearest cells; with ``--write``, write it too (a contest below confidence 0.6).
- ``pmem graph export [--key K] --format json|dot|html [--as-of N] [--system]``: the entity graph, or one
  cell's provenance subgraph. ``json`` prints one JSON object; ``dot`` and ``html`` print the document
  itself, to redirect into a file (``> graph.html``): a person opens those, no program parses them.

``--system`` keeps P-Mem's own cells (``_alias.*``) in the graph; by default they are left out.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pmem.adapters.entrypoints.cli_common import Command, UsageError, check_number, json_line
from pmem.domain.errors import InvalidOperation

Args = argparse.Namespace


def _add_next(p: argparse.ArgumentParser) -> None:
    p.add_argument("--k", type=int, default=5, help="how many proposals (default 5)")
    p.add_argument("--previous", help="the previous pick (an entity): its community earns the continuity bonus")
    p.add_argument("--as-of", dest="as_of", type=int)
    p.add_argument("--system", action="store_true", help="also P-Mem's own cells (_alias.* and other _ keys)")


def _check_next(args: Args) -> None:
    check_number("--k", args.k, "a positive number of proposals", 1)


def _next(args: Args, store: Any) -> None:
    # One command, one answer: it waits for the scores to be current (only what changed is re-scored).
    found = store.what_next(args.k, previous=args.previous, as_of=args.as_of, system=args.system, wait=None)
    _write(b"".join(json_line(p) for p in found))


def _add_require(p: argparse.ArgumentParser) -> None:
    p.add_argument("before_key", metavar="BEFORE", help="key or entity that must be known first")
    p.add_argument("after_key", metavar="AFTER", help="key or entity that depends on it")


def _require(args: Args, store: Any) -> None:
    _write(json_line(store.declare_prerequisite(args.before_key, args.after_key).to_dict()))


def _add_check(p: argparse.ArgumentParser) -> None:
    p.add_argument("key")
    p.add_argument("value")
    p.add_argument("--confidence", type=float, default=0.9, help="the observation's confidence (default 0.9)")
    p.add_argument("--exclusive", action="append", default=[], metavar="K=V,K=V",
                   help="two facts that cannot both hold (repeatable)")
    p.add_argument("--write", action="store_true", help="write it: accept, or contest below confidence 0.6")
    p.add_argument("--source", help="where the observation came from")
    p.add_argument("--node-type", dest="node_type", metavar="TYPE",
                   help="with --write: graph node type event, persona or relationship (default: by rule)")


def _check_check(args: Args) -> None:
    if not 0.0 <= args.confidence <= 1.0:
        raise UsageError(f"--confidence must be between 0 and 1, got {args.confidence}")
    args.pairs = [_pair(x) for x in args.exclusive]
    if args.node_type is not None and not args.write:
        raise UsageError("--node-type applies to a write: add --write")


def _check(args: Args, store: Any) -> None:
    from pmem.adapters.graph.conflict_check import checked_write, precheck
    from pmem.adapters.llm.judge import judge_from_env

    opts: dict[str, Any] = {"confidence": args.confidence, "exclusive": args.pairs,
                            "judge": judge_from_env()}  # None without PMEM_LLM_BASE: the rule
    if args.write:
        ev = {k: v for k, v in (("source", args.source), ("node_type", args.node_type)) if v is not None}
        _write(json_line(checked_write(store, args.key, args.value, **opts, **ev)))
    else:
        _write(json_line(precheck(store, args.key, args.value, **opts).to_dict()))


def _add_export(p: argparse.ArgumentParser) -> None:
    p.add_argument("--key", help="one cell: its versions, evidence and edges (default: the entity graph)")
    p.add_argument("--format", dest="fmt", choices=("json", "dot", "html"), default="json")
    p.add_argument("--as-of", dest="as_of", type=int)
    p.add_argument("--system", action="store_true", help="also P-Mem's own cells (_alias.* and other _ keys)")


def _export(args: Args, store: Any) -> None:
    from pmem.adapters.graph import view as graph_view

    if args.key is not None:
        h = store.history(args.key, as_of=args.as_of)
        if not h.versions:
            raise InvalidOperation(f"no cell {h.key!r} in namespace {h.namespace!r} to export", field="key")
        drawing = graph_view.provenance_drawing(h)
    else:
        drawing = graph_view.entity_drawing(store.graph(as_of=args.as_of, embed=True, system=args.system))
    out = graph_view.export(drawing, args.fmt)
    _write(json_line(out) if isinstance(out, dict) else out.encode())


def _pair(text: str) -> tuple[str, str]:
    parts = text.split(",")
    if len(parts) != 2 or not all("=" in p and p.split("=", 1)[0].strip() for p in parts):
        raise UsageError(f"--exclusive expects KEY=VALUE,KEY=VALUE, got {text!r}")
    return parts[0], parts[1]


def _write(data: bytes) -> None:
    sys.stdout.buffer.write(data)


COMMANDS = (
    Command("next", "what to ask or read next (JSON lines, best first)", _add_next, _next, _check_next),
    Command("require", "declare that AFTER needs BEFORE to be known first", _add_require, _require),
    Command("check", "pre-write conflict check of KEY = VALUE (--write: then write)", _add_check, _check,
            _check_check),
    Command("graph", "the MOSAIC-style graph (see: pmem graph export)", subcommands=(
        Command("export", "write the entity graph or a cell's provenance", _add_export, _export),)),
)
