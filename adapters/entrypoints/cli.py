"""The ``pmem`` command line (SPEC §9). A thin layer over :mod:`pmem.adapters.service.store`.

Every command prints JSON on stdout (one object, or JSON lines for lists). Errors print one JSON
object ``{"error": ..., "detail": ...}`` on stderr and exit non-zero: 2 for bad input, 1 when the
store cannot do what was asked. Nothing heavy is imported at start-up.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any, NoReturn

import orjson

from pmem.adapters.entrypoints import graph_cli
from pmem.domain.errors import InvalidBatch, InvalidOperation, PmemError
from pmem.domain.operations import parse_operation

SINGLE_OPS = ("accept", "contest", "reject", "revoke", "resolve", "support")
VALUE_REQUIRED = ("accept", "contest", "resolve")


class UsageError(InvalidOperation):
    kind = "usage"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


def _emit(obj: Any) -> None:
    sys.stdout.buffer.write(orjson.dumps(obj) + b"\n")


def _emit_lines(objs: Iterable[Any]) -> None:
    # Concatenating frees each orjson buffer at once; keeping orjson's own buffers alive until the
    # join was measured 3x slower (its allocations do not reuse memory well when retained).
    sys.stdout.buffer.write(b"".join(orjson.dumps(o) + b"\n" for o in objs))


def _fail(kind: str, detail: str, code: int) -> int:
    sys.stderr.write(orjson.dumps({"error": kind, "detail": detail}).decode() + "\n")
    return code


def read_batch(data: bytes, namespace: str) -> list[Any]:
    """Parse and validate JSON lines; any bad line raises :class:`InvalidBatch` naming it."""
    from pmem.domain.operations import Operation

    ops: list[Operation] = []
    for n, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue  # blank lines (and the final newline) carry nothing
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InvalidBatch(f"invalid UTF-8 at byte {e.start}", line=n) from None
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            raise InvalidBatch(f"malformed JSON: {e}", line=n) from None
        try:
            ops.append(parse_operation(obj, namespace))
        except InvalidOperation as e:
            raise InvalidBatch(str(e), line=n, field=e.field) from None
    return ops


def _build_parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    common.add_argument("--db", default=argparse.SUPPRESS,
                        help="SQLite file of the store (default: $PMEM_DB or ./pmem.db)")
    common.add_argument("--namespace", default=argparse.SUPPRESS, help="namespace (default: 'default')")
    common.add_argument("--quiet", "-q", action="store_true", default=argparse.SUPPRESS,
                        help="no progress bars (they are drawn only when stderr is a terminal)")
    common.add_argument("--embedder", default=argparse.SUPPRESS, metavar="onnx|hashing|litellm:MODEL",
                        help="what search, read and soft keys embed with (default: $PMEM_EMBEDDER or onnx, the "
                             "offline model); litellm:MODEL asks an OpenAI-compatible server, key from "
                             "$PMEM_EMBED_KEY")
    common.add_argument("--embedder-base", dest="embedder_base", default=argparse.SUPPRESS, metavar="URL",
                        help="the litellm embedder's server, e.g. http://127.0.0.1:8000/v1 (default: $PMEM_EMBED_BASE)")
    p = _Parser(prog="pmem", parents=[common],
                description="P-Mem: an event-sourced memory that keeps what it displaced.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    a = sub.add_parser("apply", parents=[common], help="apply JSON lines of operations (all or nothing)")
    a.add_argument("file", metavar="FILE|-", help="file of JSON lines, or - for standard input")

    def evidence(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--source", help="where the observation came from")
        sp.add_argument("--trust", type=int, help="trust 0-100 (default 50)")
        sp.add_argument("--text", help="the observation itself")
        sp.add_argument("--op-id", dest="op_id", help="idempotency key: a resend records nothing new")
        sp.add_argument("--observed-at", dest="observed_at", help="ISO-8601 time of the observation")
        sp.add_argument("--node-type", dest="node_type", metavar="TYPE",
                        help="graph node type: event, persona or relationship (default: by rule from the key)")

    for op in SINGLE_OPS:
        sp = sub.add_parser(op, parents=[common], help=f"one {op} operation")
        sp.add_argument("key")
        sp.add_argument("value", nargs=None if op in VALUE_REQUIRED else "?")
        evidence(sp)

    r = sub.add_parser("revise", parents=[common], help="the revise patch of SPEC §5")
    r.add_argument("key")
    r.add_argument("new_value")
    r.add_argument("--old-value", dest="old_value")
    r.add_argument("--correction", action="store_true", help="status: correction (default: update)")
    r.add_argument("--hard-commit", dest="hard_commit", action="store_true")
    evidence(r)

    g = sub.add_parser("get", parents=[common], help="one cell, current value first")
    g.add_argument("key")
    g.add_argument("--as-of", dest="as_of", type=int, help="read as of this event index")
    g.add_argument("--disclose", default="", help="comma list of history,alternatives,support")

    f = sub.add_parser("frontier", parents=[common], help="every non-empty cell (JSON lines)")
    f.add_argument("--as-of", dest="as_of", type=int)
    f.add_argument("--disclose", default="")

    h = sub.add_parser("history", parents=[common], help="every version of a cell")
    h.add_argument("key")
    h.add_argument("--as-of", dest="as_of", type=int)

    lg = sub.add_parser("log", parents=[common], help="events in index order (JSON lines)")
    lg.add_argument("--after", type=int, default=0)
    lg.add_argument("--limit", type=int)

    rb = sub.add_parser("rebuild", parents=[common], help="drop projections and replay the log from index 1")
    rb.add_argument("--projection", default="all", metavar="NAME|all", help="which projection (default: all)")

    sub.add_parser("stats", parents=[common],
                   help="counts of events, cells, versions; projection positions, lags and workers")

    wk = sub.add_parser("worker", parents=[common],
                        help="follow the log in this process, applying it to a projection, until SIGTERM/SIGINT")
    wk.add_argument("--projection", required=True, metavar="NAME|all", help="which projection (or all)")
    wk.add_argument("--interval", type=float, default=None,
                    help="seconds between polls of the log when idle; on PostgreSQL, which notifies the worker, "
                         "how often a watchdog re-polls in case a notification was lost "
                         "(default: $PMEM_WORKER_INTERVAL, else 0.2 on SQLite and 1 on PostgreSQL)")
    wk.add_argument("--batch-size", dest="batch_size", type=int,
                    help="events per transaction (default: the projection's own)")

    se = sub.add_parser("search", parents=[common],
                        help="cells best matching QUERY by `key: value` (JSON lines)")
    se.add_argument("query")
    se.add_argument("-k", type=int, default=12, help="how many cells (default 12)")
    se.add_argument("--as-of", dest="as_of", type=int, help="search the cells as of this event index")

    ing = sub.add_parser("ingest", parents=[common], help="extract facts from records, annotate, write; receipts")
    ing.add_argument("file", metavar="FILE|-",
                     help="records: text lines, JSON lines or a LoCoMo JSON file, or - for standard input")
    ing.add_argument("--extractor", default="template", help="template (default) or llm")
    ing.add_argument("--model", help="litellm model string for --extractor llm / --annotator llm "
                                     "(default: env PMEM_LLM_MODEL), e.g. openai/qwen")
    ing.add_argument("--api-base", dest="api_base", help="OpenAI-compatible server URL (default: env PMEM_LLM_BASE)")
    ing.add_argument("--annotator", default="rule", choices=("rule", "llm"), help="rule (default) or llm")
    ing.add_argument("--soft-keys", dest="soft_keys", default="auto", choices=("auto", "on", "off"),
                     help="merge paraphrased keys into registered ones (auto: on for --extractor llm)")
    ing.add_argument("--key-threshold", dest="key_threshold", type=float, default=0.72,
                     help="cosine at which a registered key is a merge candidate (default 0.72)")
    um = sub.add_parser("unmerge", parents=[common], help="undo a soft-key merge: KEY goes to its own cell from now on")
    um.add_argument("key")
    ing.add_argument("--format", dest="fmt", choices=("lines", "jsonl", "locomo"),
                     help="lines, jsonl or locomo (LoCoMo conversations: one record per dialogue turn); "
                          "default: jsonl for *.jsonl files, else lines")

    graph_cli.add_commands(sub, common)
    rd = sub.add_parser("read", parents=[common], help="the context an agent receives for QUESTION (SPEC §6)")
    rd.add_argument("question")
    rd.add_argument("--mode", choices=("cells", "turns"), default="cells",
                    help="cells (top-L cells, current value first; default) or turns (raw observations, pruned)")
    rd.add_argument("--budget", type=int, help="context budget in tokens (MiniLM WordPiece); default: none")
    rd.add_argument("--disclose", default="", help="cells mode: comma list of history,alternatives,support")
    rd.add_argument("-k", type=int, default=12, help="how many cells or turns to retrieve (default 12)")
    rd.add_argument("--as-of", dest="as_of", type=int, help="read as of this event index")

    sub.add_parser("demo", parents=[common], help="walk through the paper's situations on a temporary store")
    return p


def _check_index(name: str, value: int | None) -> None:
    if value is not None and value < 0:
        raise UsageError(f"{name} must be a non-negative event index, got {value}")


def run(argv: Sequence[str]) -> int:
    args = _build_parser().parse_args(argv)
    if args.command is None:
        raise UsageError("pmem: a command is required (try pmem --help)")
    if args.command == "demo":
        from pmem.adapters.entrypoints.demo import run_demo

        run_demo(sys.stdout)
        return 0
    db = getattr(args, "db", None) or os.environ.get("PMEM_DB") or "pmem.db"
    ns = getattr(args, "namespace", None) or "default"
    for name in ("as_of", "after", "limit"):
        _check_index(f"--{name.replace('_', '-')}", getattr(args, name, None))
    if args.command in ("search", "read") and args.k < 1:
        raise UsageError(f"-k must be a positive number of cells, got {args.k}")

    if args.command in graph_cli.COMMANDS:
        graph_cli.check(args, UsageError)
    if args.command == "read" and args.budget is not None and args.budget < 1:
        raise UsageError(f"--budget must be a positive number of tokens, got {args.budget}")
    if args.command == "ingest":
        return _ingest(args, db, ns)
    if args.command == "worker":
        return _worker(args, db, ns)
    if args.command == "rebuild":
        from pmem.adapters.service.store import PROJECTION_NAMES

        if args.projection != "all" and args.projection not in PROJECTION_NAMES:
            raise UsageError(f"unknown projection {args.projection!r} (expected "
                             f"{', '.join(PROJECTION_NAMES)} or all)")
    ops = None
    if args.command == "apply":
        data = sys.stdin.buffer.read() if args.file == "-" else _read_file(args.file)
        ops = read_batch(data, ns)  # validated before the store is even opened
    from pmem.adapters.service.store import Store

    with Store(db, namespace=ns, progress=_progress(args), **_embedder(args)) as store:
        if ops is not None:
            _emit_lines(r.to_dict() for r in store.apply(ops))
        elif args.command in SINGLE_OPS or args.command == "revise":
            fields = {k: getattr(args, k) for k in ("source", "trust", "text", "op_id", "observed_at", "node_type")}
            d: dict[str, Any] = {"op": args.command, "key": args.key,
                                 **{k: v for k, v in fields.items() if v is not None}}
            if args.command == "revise":
                d.update(new_value=args.new_value, status="correction" if args.correction else "update",
                         hard_commit=args.hard_commit)
                if args.old_value is not None:
                    d["old_value"] = args.old_value
            elif args.value is not None:
                d["value"] = args.value
            _emit(store.apply([parse_operation(d, ns)])[0].to_dict())
        elif args.command == "unmerge":
            from pmem.adapters.service.soft_keys import unmerge
            from pmem.domain.keys import normalize_key

            if not normalize_key(args.key):
                raise UsageError(f"key {args.key!r} is empty after normalisation")
            _emit(unmerge(store, normalize_key(args.key)).to_dict())
        elif args.command == "get":
            _emit(store.get(args.key, as_of=args.as_of, disclose=args.disclose.split(",")).to_dict())
        elif args.command == "frontier":
            _emit_lines(c.to_dict() for c in store.frontier(as_of=args.as_of, disclose=args.disclose.split(",")))
        elif args.command == "history":
            _emit(store.history(args.key, as_of=args.as_of).to_dict())
        elif args.command == "log":
            _emit_lines(store.log(after=args.after, limit=args.limit))
        elif args.command == "search":
            _emit_lines(r.to_dict() for r in store.search(args.query, args.k, as_of=args.as_of))
        elif args.command == "read":
            _emit(store.read(args.question, mode=args.mode, k=args.k, budget=args.budget,
                             disclose=args.disclose.split(","), as_of=args.as_of).to_dict())
        elif args.command == "rebuild":
            _emit(store.rebuild(args.projection))
        elif args.command == "stats":
            _emit(store.stats())
        elif args.command in graph_cli.COMMANDS:
            graph_cli.run(args, store)
    return 0


def _ingest(args: argparse.Namespace, db: str, ns: str) -> int:
    from pmem.adapters.service.ingest import Ingestor, llm_settings, make_annotator, make_extractor, make_identity
    from pmem.adapters.sources.records import read_records

    llm = llm_settings(args.model, args.api_base)
    fmt = args.fmt or ("jsonl" if args.file.endswith(".jsonl") else "lines")
    extractor = make_extractor(args.extractor, llm, fmt)  # before the store exists: a bad choice creates nothing
    annotator = make_annotator(args.annotator, llm)
    data = sys.stdin.buffer.read() if args.file == "-" else _read_file(args.file)
    source = "stdin" if args.file == "-" else os.path.basename(args.file)
    from pmem.adapters.progress import tracked
    from pmem.adapters.service.store import Store

    try:
        records = list(read_records(data, fmt))  # a whole-file format (locomo) is checked here, before the store
    except InvalidOperation as e:
        raise InvalidOperation(f"{args.file}: {e}", field=e.field) from None
    progress = _progress(args)
    with Store(db, namespace=ns, progress=progress, **_embedder(args)) as store:
        identity = make_identity(store, args.soft_keys, args.extractor, llm, args.key_threshold)
        ingestor = Ingestor(store, extractor, source=source, annotator=annotator, identity=identity)
        for receipt in ingestor.run(tracked(records, len(records), "ingest", progress)):
            _emit(receipt)
    return 0


def _worker(args: argparse.Namespace, db: str, ns: str) -> int:
    """Follow the log for one projection (or all) until SIGTERM/SIGINT: JSON lines, one per batch."""
    from pmem.adapters.service.store import PROJECTION_NAMES

    if args.projection != "all" and args.projection not in PROJECTION_NAMES:
        raise UsageError(f"unknown projection {args.projection!r} (expected {', '.join(PROJECTION_NAMES)} or all)")
    raw = args.interval if args.interval is not None else os.environ.get("PMEM_WORKER_INTERVAL")
    interval: float | None = None
    if raw is not None:
        try:
            interval = float(raw)
        except ValueError:
            raise UsageError(f"PMEM_WORKER_INTERVAL must be a number of seconds, got {raw!r}") from None
        if not interval > 0:
            raise UsageError(f"--interval must be a positive number of seconds, got {raw}")
    if args.batch_size is not None and args.batch_size < 1:
        raise UsageError(f"--batch-size must be a positive number of events, got {args.batch_size}")
    from pmem.adapters.entrypoints.worker import run_worker
    from pmem.adapters.service.store import Store

    def emit(line: dict[str, Any]) -> None:
        _emit(line)
        sys.stdout.flush()  # a daemon's output goes to a pipe or a log: each batch shows at once

    with Store(db, namespace=ns, **_embedder(args)) as store:
        emit(run_worker(store, args.projection, interval=interval, batch_size=args.batch_size, emit=emit))
    return 0


def _embedder(args: argparse.Namespace) -> dict[str, Any]:
    """The store's embedder settings from ``--embedder`` / ``--embedder-base`` (else the environment)."""
    return {"embedder": getattr(args, "embedder", None), "embedder_base": getattr(args, "embedder_base", None)}


def _progress(args: argparse.Namespace) -> Any:
    """Progress bars on stderr when it is a terminal, unless ``--quiet`` (pmem.adapters.progress)."""
    from pmem.adapters.progress import terminal_progress

    return terminal_progress(quiet=getattr(args, "quiet", False))


def _read_file(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None


def main(argv: Sequence[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in argv):
        _build_parser().parse_args(argv)  # prints help and exits 0
    try:
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
