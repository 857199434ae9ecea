"""The ``pmem`` commands that run long or open the store their own way: ``rebuild``, ``worker`` (a
daemon, JSON lines as it goes), ``ingest`` (checks its extractor and records before the store exists)
and ``demo`` (a temporary store). Their rows of the command table of :mod:`.cli_commands`."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from pmem.adapters.entrypoints.cli_common import (
    Args,
    Command,
    UsageError,
    check_number,
    embedder,
    emit,
    emit_lines,
    progress,
    read_input,
)
from pmem.domain.errors import InvalidOperation, StoreUnavailable
from pmem.domain.extraction.slot_modes import DEFAULT_SLOT_MODE, SLOT_MODES


def _check_projection(args: Args) -> None:
    from pmem.adapters.readmodels.registry import projection_problem

    problem = projection_problem(args.projection)
    if problem is not None:
        raise UsageError(problem)


def _add_rebuild(p: argparse.ArgumentParser) -> None:
    p.add_argument("--projection", default="all", metavar="NAME|all", help="which projection (default: all)")


def _rebuild(args: Args, store: Any) -> None:
    emit(store.rebuild(args.projection))


def _add_worker(p: argparse.ArgumentParser) -> None:
    p.add_argument("--projection", required=True, metavar="NAME|all", help="which projection (or all)")
    p.add_argument("--interval", type=float, default=None,
                   help="seconds between polls of the log when idle; on PostgreSQL, which notifies the worker, "
                        "how often a watchdog re-polls in case a notification was lost "
                        "(default: $PMEM_WORKER_INTERVAL, else 0.2 on SQLite and 1 on PostgreSQL)")
    p.add_argument("--batch-size", dest="batch_size", type=int,
                   help="events per transaction (default: the projection's own)")


def _interval(args: Args) -> float | None:
    """``--interval``, else ``$PMEM_WORKER_INTERVAL``, else None (the worker's default)."""
    raw = args.interval if args.interval is not None else os.environ.get("PMEM_WORKER_INTERVAL")
    if raw is None:
        return None
    try:
        interval = float(raw)
    except ValueError:
        raise UsageError(f"PMEM_WORKER_INTERVAL must be a number of seconds, got {raw!r}") from None
    if not 0 < interval < float("inf"):
        raise UsageError(f"--interval must be a positive number of seconds, got {raw}")
    return interval


def _worker(args: Args) -> int:
    """Follow the log for one projection (or all) until SIGTERM/SIGINT: JSON lines, one per batch."""
    _check_projection(args)
    interval = _interval(args)
    check_number("--batch-size", args.batch_size, "a positive number of events", 1)
    from pmem.adapters.entrypoints.worker import run_worker
    from pmem.adapters.service.store import Store

    def emit_now(line: dict[str, Any]) -> None:
        emit(line)
        sys.stdout.flush()  # a daemon's output goes to a pipe or a log: each batch shows at once

    with Store(args.db, namespace=args.namespace, **embedder(args)) as store:
        emit_now(run_worker(store, args.projection, interval=interval, batch_size=args.batch_size, emit=emit_now))
    return 0


def _add_ingest(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE|-",
                   help="records: text lines, JSON lines or a LoCoMo JSON file, or - for standard input")
    p.add_argument("--extractor", default="template", help="template (default) or llm")
    p.add_argument("--model", help="litellm model string for --extractor llm / --annotator llm "
                                   "(default: env PMEM_LLM_MODEL), e.g. openai/qwen")
    p.add_argument("--api-base", dest="api_base", help="OpenAI-compatible server URL (default: env PMEM_LLM_BASE)")
    p.add_argument("--no-verify", dest="verify", action="store_false",
                   help="with --extractor llm: write grounded facts without the verification pass (a blind "
                        "second question to the model per fact; on by default)")
    p.add_argument("--slots", default=DEFAULT_SLOT_MODE, choices=SLOT_MODES,
                   help="with --extractor llm: also ask a fixed card of lasting-fact slots about the speaker: as "
                        "well as the free-form pass, for every record (both, the default: about twice the model "
                        "calls), only for records it left without facts (fallback), instead of it (only), or "
                        "never (off: the free-form pass alone)")
    p.add_argument("--reply-context", dest="reply_context", action="store_true",
                   help="with --extractor llm and --format locomo: show the model the turn each turn answers, as "
                        "context only (a value must still come from the turn itself); off by default")
    p.add_argument("--annotator", default="rule", choices=("rule", "llm"), help="rule (default) or llm")
    p.add_argument("--soft-keys", dest="soft_keys", default="auto", choices=("auto", "on", "off"),
                   help="merge paraphrased keys into registered ones (auto: on for statement keys "
                        "and for --extractor llm)")
    p.add_argument("--key-threshold", dest="key_threshold", type=float, default=0.72,
                   help="cosine at which a registered key is a merge candidate (default 0.72)")
    p.add_argument("--format", dest="fmt", choices=("lines", "jsonl", "locomo"),
                   help="lines, jsonl or locomo (LoCoMo conversations: one record per dialogue turn); "
                        "default: jsonl for *.jsonl files, else lines")


def _ingest(args: Args) -> int:
    from pmem.adapters.service.ingest import Ingestor, llm_settings, make_annotator, make_extractor, make_identity
    from pmem.adapters.sources.records import read_records

    llm = llm_settings(args.model, args.api_base)
    fmt = args.fmt or ("jsonl" if args.file.endswith(".jsonl") else "lines")
    # before the store exists: a bad choice creates nothing
    extractor = make_extractor(args.extractor, llm, fmt, args.verify, args.slots, args.reply_context)
    annotator = make_annotator(args.annotator, llm)
    data = read_input(args.file)
    source = "stdin" if args.file == "-" else os.path.basename(args.file)
    from pmem.adapters.progress import tracked
    from pmem.adapters.service.store import Store

    try:
        records = list(read_records(data, fmt))  # a whole-file format (locomo) is checked here, before the store
    except InvalidOperation as e:
        raise InvalidOperation(f"{args.file}: {e}", field=e.field) from None
    bars = progress(args)
    with Store(args.db, namespace=args.namespace, progress=bars, **embedder(args)) as store:
        identity = make_identity(store, args.soft_keys, args.extractor, llm, args.key_threshold)
        from pmem.adapters.service.eager_index import EagerIndex

        ingestor = Ingestor(store, extractor, source=source, annotator=annotator, identity=identity,
                            index=EagerIndex(store))
        for receipt in ingestor.run(tracked(records, len(records), "ingest", bars)):
            emit(receipt)
    return 0


def _add_doctor(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sample", type=int, default=200,
                   help="cells of the frontier projection to compare with a replay of the log (default 200)")


def _doctor(args: Args) -> int:
    """Every check of the store as a JSON line; exit 1 when one failed (its ``fix`` names the repair)."""
    check_number("--sample", args.sample, "a number of cells from 0 to 1000000")
    from pmem.adapters.service.store import Store
    from pmem.adapters.storage.backend import is_url

    if not is_url(args.db) and not os.path.exists(args.db):  # the doctor never creates a store
        raise StoreUnavailable(f"cannot check store {args.db}: no such file")

    with Store(args.db, namespace=args.namespace) as store:
        checks = store.doctor(args.sample)
    for check in checks:
        emit(check)
    return 0 if all(c["ok"] for c in checks) else 1


def _add_migrate_keys(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dry-run", action="store_true", help="print what it would re-key and what conflicts; change "
                   "nothing")
    p.add_argument("--spellings", metavar="FILE", help="raw keys, one per line (e.g. from the agent's own records): "
                   "each cell stored under its edition-1 key is re-keyed to its edition-2 key, as events")


def _check_migrate_keys(args: Args) -> None:
    """Read the spellings file before the store opens: a missing or undecodable file is bad input."""
    args.spelling_lines = []
    if args.spellings is None:
        return
    try:
        with open(args.spellings, encoding="utf-8") as f:
            args.spelling_lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read --spellings {args.spellings}: {e}") from e


def _migrate_keys(args: Args, store: Any) -> None:
    """JSON lines: each re-keying (or would-be), each conflict or skip, then a summary line."""
    emit_lines(store.migrate_keys(args.spelling_lines, dry_run=args.dry_run))


def _demo(args: Args) -> int:
    from pmem.adapters.entrypoints.demo import run_demo

    run_demo(sys.stdout)
    return 0


REBUILD = Command("rebuild", "drop projections and replay the log from index 1", _add_rebuild, _rebuild,
                  _check_projection)
WORKER = Command("worker", "follow the log in this process, applying it to a projection, until SIGTERM/SIGINT",
                 _add_worker, main=_worker)
INGEST = Command("ingest", "extract facts from records, annotate, write; receipts", _add_ingest, main=_ingest)
DOCTOR = Command("doctor", "check the store (integrity, projections against the log, leftovers of rebuilds and "
                 "workers, stopped projections, key edition); JSON lines, exit 1 when a check fails", _add_doctor,
                 main=_doctor)
DEMO = Command("demo", "walk through the paper's situations on a temporary store", main=_demo)
MIGRATE = Command("migrate", "move the store to a newer rule (see: pmem migrate keys)", subcommands=(
    Command("keys", "switch a key-edition-1 store to edition 2, re-keying the cells --spellings names as events "
            "(JSON lines)", _add_migrate_keys, _migrate_keys, _check_migrate_keys),))
