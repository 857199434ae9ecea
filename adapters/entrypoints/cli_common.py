"""What every ``pmem`` command shares: the table row of a command, the usage error, the JSON output, the
settings read from the common options and the reading of a batch of operations. Imports nothing heavy
(the CLI starts fast)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import orjson

from pmem.domain.errors import InvalidBatch, InvalidOperation
from pmem.domain.keys import KEY_EDITION
from pmem.domain.op_decoding import decode_line
from pmem.domain.operations import checked_count

Args = argparse.Namespace


class UsageError(InvalidOperation):
    kind = "usage"


@dataclass(frozen=True)
class Command:
    """One row of the command table. ``check`` rejects bad input before the store is opened (it may keep
    what it parsed on ``args``); ``handle`` does the work on the open store. A command with ``main``
    opens what it needs itself (or nothing): ``main(args)`` returns the exit code."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None
    handle: Callable[[Args, Any], None] | None = None
    check: Callable[[Args], None] | None = None
    main: Callable[[Args], int] | None = None
    subcommands: tuple[Command, ...] = ()


# JSON lets U+0085, U+2028 and U+2029 stand raw inside a string, but str.splitlines() and many line
# readers break lines at them: escaped, an output line stays one line whatever a key or value holds.
_LINE_BREAKS = ((b"\xc2\x85", b"\\u0085"), (b"\xe2\x80\xa8", b"\\u2028"), (b"\xe2\x80\xa9", b"\\u2029"))


def json_line(obj: Any) -> bytes:
    """``obj`` as one line of JSON, with its newline."""
    out = orjson.dumps(obj)
    if b"\xc2\x85" in out or b"\xe2\x80\xa8" in out or b"\xe2\x80\xa9" in out:
        for raw, escaped in _LINE_BREAKS:
            out = out.replace(raw, escaped)
    return out + b"\n"


def emit(obj: Any) -> None:
    sys.stdout.buffer.write(json_line(obj))


EMIT_CHUNK = 16384


def emit_lines(objs: Iterable[Any], chunk: int = EMIT_CHUNK) -> None:
    # Concatenating frees each orjson buffer at once; keeping them all alive until a join is slower
    # (their allocations do not reuse memory well when retained: docs/benchmarks.md). Written
    # ``chunk`` lines at a time, so a million receipts are never one buffer.
    out, lines = sys.stdout.buffer, []
    for o in objs:
        lines.append(json_line(o))
        if len(lines) == chunk:
            out.write(b"".join(lines))
            lines.clear()
    out.write(b"".join(lines))


def check_number(name: str, value: int | None, what: str, minimum: int = 0) -> None:
    """Refuse an integer option outside ``minimum`` to 2**63-1 (``what`` it must be, for the message)."""
    if value is not None:
        try:
            checked_count(value, name, what, minimum=minimum)
        except InvalidOperation as e:
            raise UsageError(str(e)) from None


def check_index(name: str, value: int | None) -> None:
    check_number(name, value, "a non-negative event index")


def check_k(args: Args) -> None:
    check_number("-k", args.k, "a positive number of cells", 1)


def embedder(args: Args) -> dict[str, Any]:
    """The store's embedder settings from ``--embedder`` / ``--embedder-base`` (else the environment)."""
    return {"embedder": getattr(args, "embedder", None), "embedder_base": getattr(args, "embedder_base", None)}


def progress(args: Args) -> Any:
    """Progress bars on stderr when it is a terminal, unless ``--quiet`` (pmem.adapters.progress)."""
    from pmem.adapters.progress import terminal_progress

    return terminal_progress(quiet=getattr(args, "quiet", False))


def read_input(path: str) -> bytes:
    """The bytes of ``path``, or of standard input for ``-``."""
    return sys.stdin.buffer.read() if path == "-" else read_file(path)


def read_file(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None


CHUNK_LINES = 4096  # lines parsed, decided and written at a time: a batch's memory is a chunk's


def open_input(path: str) -> BinaryIO:
    """``path`` opened for reading bytes, or standard input for ``-``."""
    if path == "-":
        return sys.stdin.buffer
    try:
        return open(path, "rb")  # noqa: SIM115  (the caller closes it once the batch is written)
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None


def read_chunks(lines: Iterable[bytes], namespace: str, key_edition: int = KEY_EDITION,
                size: int = CHUNK_LINES) -> Iterator[list[Any]]:
    """The operations of JSON ``lines`` (each may end in its newline), ``size`` lines a chunk, checked
    as :func:`read_batch` checks them: a bad line raises :class:`InvalidBatch` naming it (lines are
    numbered across all chunks) when its chunk is read."""
    chunk: list[Any] = []
    for n, raw in enumerate(lines, 1):
        if raw.endswith(b"\n"):
            raw = raw[:-1]
        if not raw.strip():
            continue  # blank lines carry nothing
        chunk.append(parse_line(raw, n, namespace, key_edition))
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def read_batch(data: bytes, namespace: str, key_edition: int = KEY_EDITION) -> list[Any]:
    """Decode JSON lines into operations (:mod:`pmem.domain.op_decoding`, once each), keys by
    ``key_edition``; any bad line raises :class:`InvalidBatch` naming it."""
    from pmem.adapters.eventstore.gc_pause import no_gc

    ops: list[Any] = []
    with no_gc():  # hundreds of thousands of long-lived operations, no reference cycles
        for n, raw in enumerate(data.split(b"\n"), 1):
            if raw.strip():  # blank lines (and the final newline) carry nothing
                ops.append(parse_line(raw, n, namespace, key_edition))
    return ops


def parse_line(raw: bytes, n: int, namespace: str, key_edition: int) -> Any:
    """The operation of line ``n``, or :class:`InvalidBatch` saying why it is not one."""
    try:
        return decode_line(raw, namespace, key_edition)
    except InvalidOperation as e:
        raise InvalidBatch(str(e), line=n, field=e.field) from None
