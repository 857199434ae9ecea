"""The graph commands of ``pmem`` (issue 6), kept apart from :mod:`pmem.adapters.entrypoints.cli`, which calls in here.

- ``pmem next [--k K] [--previous ENTITY] [--as-of N]``: JSON lines, the best next questions (SPEC §8).
- ``pmem require BEFORE AFTER``: declare a prerequisite edge; one receipt.
- ``pmem check KEY VALUE [--confidence C] [--exclusive K=V,K=V]... [--write]``: the pre-write conflict
  check against the 5 nearest cells; with ``--write``, write it too (a contest below confidence 0.6).
- ``pmem graph export [--key K] --format json|dot|html [--as-of N]``: the entity graph, or one cell's
  provenance subgraph. ``json`` prints one JSON object; ``dot`` and ``html`` print the document
  itself, to redirect into a file (``> graph.html``): a person opens those, no program parses them.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson

from pmem.domain.errors import InvalidOperation

COMMANDS = ("next", "require", "graph", "check")


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the graph commands to the ``pmem`` sub-command parser."""
    nx = sub.add_parser("next", parents=[common], help="what to ask or read next (JSON lines, best first)")
    nx.add_argument("--k", type=int, default=5, help="how many proposals (default 5)")
    nx.add_argument("--previous", help="the previous pick (an entity): its community earns the continuity bonus")
    nx.add_argument("--as-of", dest="as_of", type=int)

    rq = sub.add_parser("require", parents=[common], help="declare that AFTER needs BEFORE to be known first")
    rq.add_argument("before_key", metavar="BEFORE", help="key or entity that must be known first")
    rq.add_argument("after_key", metavar="AFTER", help="key or entity that depends on it")

    ck = sub.add_parser("check", parents=[common], help="pre-write conflict check of KEY = VALUE (--write: then write)")
    ck.add_argument("key")
    ck.add_argument("value")
    ck.add_argument("--confidence", type=float, default=0.9, help="the observation's confidence (default 0.9)")
    ck.add_argument("--exclusive", action="append", default=[], metavar="K=V,K=V",
                    help="two facts that cannot both hold (repeatable)")
    ck.add_argument("--write", action="store_true", help="write it: accept, or contest below confidence 0.6")
    ck.add_argument("--source", help="where the observation came from")
    ck.add_argument("--node-type", dest="node_type", metavar="TYPE",
                    help="with --write: graph node type event, persona or relationship (default: by rule)")

    gr = sub.add_parser("graph", parents=[common], help="the MOSAIC-style graph (see: pmem graph export)")
    gsub = gr.add_subparsers(dest="graph_command", metavar="SUBCOMMAND", parser_class=sub._parser_class)
    ex = gsub.add_parser("export", parents=[common], help="write the entity graph or a cell's provenance")
    ex.add_argument("--key", help="one cell: its versions, evidence and edges (default: the entity graph)")
    ex.add_argument("--format", dest="fmt", choices=("json", "dot", "html"), default="json")
    ex.add_argument("--as-of", dest="as_of", type=int)


def check(args: argparse.Namespace, usage_error: type[InvalidOperation]) -> None:
    """Reject bad input before the store is opened."""
    if args.command == "next" and args.k < 1:
        raise usage_error(f"--k must be a positive number of proposals, got {args.k}")
    if args.command == "check":
        if not 0.0 <= args.confidence <= 1.0:
            raise usage_error(f"--confidence must be between 0 and 1, got {args.confidence}")
        args.pairs = [_pair(x, usage_error) for x in args.exclusive]
        if args.node_type is not None and not args.write:
            raise usage_error("--node-type applies to a write: add --write")
    if args.command == "graph" and args.graph_command is None:
        raise usage_error("pmem graph: a subcommand is required (export)")


def run(args: argparse.Namespace, store: Any) -> None:
    from pmem.adapters.graph import view as graph_view

    if args.command == "require":
        _write(orjson.dumps(store.declare_prerequisite(args.before_key, args.after_key).to_dict()) + b"\n")
        return
    if args.command == "check":
        from pmem.adapters.graph.conflict_check import checked_write, precheck
        from pmem.adapters.llm.judge import judge_from_env

        opts: dict[str, Any] = {"confidence": args.confidence, "exclusive": args.pairs,
                                "judge": judge_from_env()}  # None without PMEM_LLM_BASE: the rule
        if args.write:
            ev = {k: v for k, v in (("source", args.source), ("node_type", args.node_type)) if v is not None}
            _write(orjson.dumps(checked_write(store, args.key, args.value, **opts, **ev)) + b"\n")
        else:
            _write(orjson.dumps(precheck(store, args.key, args.value, **opts).to_dict()) + b"\n")
        return
    if args.command == "next":
        g = store.graph(as_of=args.as_of, embed=True)
        previous = None if args.previous is None else _slug(args.previous)
        _write(b"".join(orjson.dumps(p) + b"\n" for p in graph_view.proposals(g, args.k, previous)))
        return
    if args.key is not None:
        h = store.history(args.key, as_of=args.as_of)
        if not h.versions:
            raise InvalidOperation(f"no cell {h.key!r} in namespace {h.namespace!r} to export", field="key")
        drawing = graph_view.provenance_drawing(h)
    else:
        drawing = graph_view.entity_drawing(store.graph(as_of=args.as_of, embed=True))
    out = graph_view.export(drawing, args.fmt)
    _write(orjson.dumps(out) + b"\n" if isinstance(out, dict) else out.encode())


def _pair(text: str, usage_error: type[InvalidOperation]) -> tuple[str, str]:
    parts = text.split(",")
    if len(parts) != 2 or not all("=" in p and p.split("=", 1)[0].strip() for p in parts):
        raise usage_error(f"--exclusive expects KEY=VALUE,KEY=VALUE, got {text!r}")
    return parts[0], parts[1]


def _slug(text: str) -> str:
    from pmem.projections.graph import entity_slug

    return entity_slug(text)


def _write(data: bytes) -> None:
    sys.stdout.buffer.write(data)
