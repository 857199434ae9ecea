"""The command table of ``pmem``: one :class:`~.cli_common.Command` per command, in the order ``pmem
--help`` lists them. The writing and reading commands are here; ingest, worker, rebuild and demo, which
run longer or open the store their own way, are in :mod:`.cli_jobs`, the graph commands in :mod:`.graph_cli`."""

from __future__ import annotations

import argparse
import gc
import shutil
import sys
import tempfile
from typing import Any

from pmem.adapters.entrypoints import cli_jobs, graph_cli, mcp_cli, portability_cli, server_cli
from pmem.adapters.entrypoints.cli_common import (
    Args,
    Command,
    UsageError,
    check_k,
    check_number,
    emit,
    emit_lines,
    json_line,
    open_input,
    read_chunks,
)
from pmem.domain.operations import parse_operation

SINGLE_OPS = ("accept", "contest", "reject", "revoke", "resolve", "support")
VALUE_REQUIRED = ("accept", "contest", "resolve")
EVIDENCE = ("source", "trust", "text", "op_id", "observed_at", "node_type")


def _add_apply(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE|-", help="file of JSON lines, or - for standard input")


def _check_apply(args: Args) -> None:
    args.input = open_input(args.file)  # a file that cannot be read is refused before the store is opened


def _apply(args: Args, store: Any) -> None:
    """Stream the lines into one transaction, a chunk at a time, by the store's key edition; the
    receipts are spooled to a temporary file and printed only once the batch is committed (a bad line
    rolls it back, and nothing but the error is printed)."""
    # The cyclic collector stays off to the end of the command: the batch makes no reference cycles,
    # and turned back on it would walk every object the batch left alive, for nothing.
    gc.disable()
    with args.input as lines, tempfile.TemporaryFile() as spool:
        def keep(receipts: list[Any]) -> None:
            spool.write(b"".join([json_line(r.to_dict()) for r in receipts]))

        store.apply_stream(read_chunks(lines, args.namespace, store.key_edition), keep)
        # ... nor at exit, where the interpreter collects once more whatever the setting: what is left
        # alive is moved where no collection looks
        gc.freeze()
        spool.seek(0)
        shutil.copyfileobj(spool, sys.stdout.buffer, 1 << 20)


def _add_evidence(p: argparse.ArgumentParser) -> None:
    p.add_argument("--source", help="where the observation came from")
    p.add_argument("--trust", type=int, help="trust 0-100 (default 50)")
    p.add_argument("--text", help="the observation itself")
    p.add_argument("--op-id", dest="op_id", help="idempotency key: a resend records nothing new")
    p.add_argument("--observed-at", dest="observed_at", help="ISO-8601 time of the observation")
    p.add_argument("--node-type", dest="node_type", metavar="TYPE",
                   help="graph node type: event, persona or relationship (default: by rule from the key)")


def _single_op(op: str) -> Command:
    def add_arguments(p: argparse.ArgumentParser) -> None:
        p.add_argument("key")
        p.add_argument("value", nargs=None if op in VALUE_REQUIRED else "?")
        _add_evidence(p)

    return Command(op, f"one {op} operation", add_arguments, _write_one)


def _add_revise(p: argparse.ArgumentParser) -> None:
    p.add_argument("key")
    p.add_argument("new_value")
    p.add_argument("--old-value", dest="old_value")
    p.add_argument("--correction", action="store_true", help="status: correction (default: update)")
    p.add_argument("--hard-commit", dest="hard_commit", action="store_true")
    _add_evidence(p)


def _write_one(args: Args, store: Any) -> None:
    """One operation from the arguments of a single-operation command or ``revise``; its receipt."""
    fields = {k: getattr(args, k) for k in EVIDENCE}
    d: dict[str, Any] = {"op": args.command, "key": args.key, **{k: v for k, v in fields.items() if v is not None}}
    if args.command == "revise":
        d.update(new_value=args.new_value, status="correction" if args.correction else "update",
                 hard_commit=args.hard_commit)
        if args.old_value is not None:
            d["old_value"] = args.old_value
    elif args.value is not None:
        d["value"] = args.value
    emit(store.apply([parse_operation(d, args.namespace, store.key_edition)])[0].to_dict())


def _add_get(p: argparse.ArgumentParser) -> None:
    p.add_argument("key")
    p.add_argument("--as-of", dest="as_of", type=int, help="read as of this event index")
    p.add_argument("--disclose", default="", help="comma list of history,alternatives,support")


def _get(args: Args, store: Any) -> None:
    emit(store.get(args.key, as_of=args.as_of, disclose=args.disclose.split(",")).to_dict())


def _add_frontier(p: argparse.ArgumentParser) -> None:
    p.add_argument("--as-of", dest="as_of", type=int)
    p.add_argument("--disclose", default="")
    p.add_argument("--system", action="store_true", help="also P-Mem's own cells (_alias.* and other _ keys)")


def _frontier(args: Args, store: Any) -> None:
    emit_lines(c.to_dict() for c in store.frontier(as_of=args.as_of, disclose=args.disclose.split(","),
                                                   system=args.system))


def _add_history(p: argparse.ArgumentParser) -> None:
    p.add_argument("key")
    p.add_argument("--as-of", dest="as_of", type=int)


def _history(args: Args, store: Any) -> None:
    emit(store.history(args.key, as_of=args.as_of).to_dict())


def _add_log(p: argparse.ArgumentParser) -> None:
    p.add_argument("--after", type=int, default=0)
    p.add_argument("--limit", type=int)


def _log(args: Args, store: Any) -> None:
    emit_lines(store.log(after=args.after, limit=args.limit))


def _stats(args: Args, store: Any) -> None:
    emit(store.stats())


def _add_search(p: argparse.ArgumentParser) -> None:
    p.add_argument("query")
    p.add_argument("-k", type=int, default=12, help="how many cells (default 12)")
    p.add_argument("--as-of", dest="as_of", type=int, help="search the cells as of this event index")


def _search(args: Args, store: Any) -> None:
    emit_lines(r.to_dict() for r in store.search(args.query, args.k, as_of=args.as_of))


def _add_unmerge(p: argparse.ArgumentParser) -> None:
    p.add_argument("key")


def _unmerge(args: Args, store: Any) -> None:
    from pmem.adapters.service.soft_keys import unmerge
    from pmem.domain.keys import normalize_key
    from pmem.domain.operations import MAX_FIELD_CHARS, checked_string

    checked_string(args.key, "key", MAX_FIELD_CHARS, blank=True)  # the limits of a key a write takes
    key = normalize_key(args.key, store.key_edition)
    if not key:
        raise UsageError(f"key {args.key!r} is empty after normalisation")
    emit(unmerge(store, key).to_dict())


def _add_forget(p: argparse.ArgumentParser) -> None:
    p.add_argument("key", nargs="?", help="the cell to forget")
    p.add_argument("--subject", help="forget every cell of this subject: the key SUBJECT and every SUBJECT.*")


def _check_forget(args: Args) -> None:
    if (args.key is None) == (args.subject is None):
        raise UsageError("forget takes a KEY or --subject SUBJECT (one of them)")


def _forget(args: Args, store: Any) -> None:
    emit_lines(r.to_dict() for r in store.forget(args.key, subject=args.subject))


def _add_read(p: argparse.ArgumentParser) -> None:
    p.add_argument("question")
    p.add_argument("--mode", choices=("cells", "turns"), default="cells",
                   help="cells (top-L cells, current value first; default) or turns (raw observations, pruned)")
    p.add_argument("--budget", type=int, help="context budget in tokens (MiniLM WordPiece); default: none")
    p.add_argument("--disclose", default="", help="cells mode: comma list of history,alternatives,support")
    p.add_argument("-k", type=int, default=12, help="how many cells or turns to retrieve (default 12)")
    p.add_argument("--as-of", dest="as_of", type=int, help="read as of this event index")
    p.add_argument("--system", action="store_true", help="also P-Mem's own cells (_alias.* and other _ keys)")
    p.add_argument("--all-alternatives", dest="alternatives", action="store_const", const="all",
                   default="summary", help="list every alternative (default: those below the head's trust "
                   "are only counted, '+N lower-trust claims')")
    p.add_argument("--min-trust", dest="min_trust", type=int,
                   help="leave out versions, cells and turns whose trust is below N (0-100)")
    p.add_argument("--hops", type=int, default=0,
                   help="multi-hop: also read the facts along the question's relations from the entities it "
                        "names, at least N links, one per relation it names (offline, no model; 0-6); 'paths' "
                        "shows them")
    p.add_argument("--iterative", action="store_true",
                   help="multi-hop: up to 3 follow-up lookups planned by the LLM at $PMEM_LLM_BASE ($PMEM_LLM_MODEL)")
    p.add_argument("--dated", action="store_true",
                   help="cells mode: each cell after the day its current value was observed, '[25 May 2023] key = "
                        "value' (turns always show theirs)")


def _check_read(args: Args) -> None:
    check_k(args)
    check_number("--budget", args.budget, "a positive number of tokens", 1)
    check_number("--min-trust", args.min_trust, "a trust from 0 to 100", 0)
    check_number("--hops", args.hops, "a number of hops from 0 to 6", 0)


def _read(args: Args, store: Any) -> None:
    emit(store.read(args.question, mode=args.mode, k=args.k, budget=args.budget,
                    disclose=args.disclose.split(","), as_of=args.as_of, system=args.system,
                    alternatives=args.alternatives, min_trust=args.min_trust, hops=args.hops,
                    iterative=args.iterative, dated=args.dated).to_dict())


COMMANDS: tuple[Command, ...] = (
    Command("apply", "apply JSON lines of operations (all or nothing)", _add_apply, _apply, _check_apply),
    *(_single_op(op) for op in SINGLE_OPS),
    Command("revise", "the revise patch: an update or correction, classified against the head", _add_revise,
            _write_one),
    Command("get", "one cell, current value first", _add_get, _get),
    Command("frontier", "every non-empty cell (JSON lines)", _add_frontier, _frontier),
    Command("history", "every version of a cell", _add_history, _history),
    Command("log", "events in index order (JSON lines)", _add_log, _log),
    cli_jobs.REBUILD,
    Command("stats", "counts of events, cells, namespaces; projection positions, lags and workers", None, _stats),
    cli_jobs.WORKER,
    Command("search", "cells best matching QUERY by `key: value` (JSON lines)", _add_search, _search, check_k),
    cli_jobs.INGEST,
    Command("unmerge", "undo a soft-key merge: KEY goes to its own cell from now on", _add_unmerge, _unmerge),
    Command("forget", "make a cell (or every cell of a subject) unrecoverable: its data key is destroyed",
            _add_forget, _forget, _check_forget),
    *graph_cli.COMMANDS,
    Command("read", "the context an agent receives for QUESTION", _add_read, _read, _check_read),
    cli_jobs.DOCTOR,
    cli_jobs.MIGRATE,
    *portability_cli.COMMANDS,
    cli_jobs.DEMO,
    *server_cli.COMMANDS,
    mcp_cli.MCP,
)
BY_NAME = {c.name: c for c in COMMANDS}
