"""Decoding and validating operations through the one schema, no store: ``pmem apply``'s lines
(``read_batch``) and the Python API's dicts (``parse_operation``), each beside ``msgspec`` decoding the
same input into the operation structs and nothing else (the floor: no semantic checks, no operations).
Before and after a change, run it at both commits: the floor keeps the figures comparable.

``python -m benchmarks.op_decoding [--lines N]`` (default 200,000: one line in 20 has a non-ASCII value,
one in 10 is a ``revise``).
"""

from __future__ import annotations

import argparse

import msgspec
import orjson

from benchmarks.harness import Run, add_output_options, best_of
from pmem.adapters.entrypoints.cli_common import read_batch
from pmem.domain.op_schema import OpStruct
from pmem.domain.operations import parse_operation


def operations(n: int) -> list[dict[str, object]]:
    """``n`` operations over ``n // 200`` keys, as agents send them."""
    out: list[dict[str, object]] = []
    for i in range(n):
        key = f"user{i % max(1, n // 200)}.fact"
        value = f"caf\u00e9 {i}" if i % 20 == 0 else f"value {i}"
        if i % 10 == 5:
            out.append({"op": "revise", "key": key, "new_value": value, "status": "update", "source": "agent"})
        else:
            out.append({"op": "accept", "key": key, "value": value, "source": "agent", "trust": 60,
                        "op_id": f"m{i}"})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=200_000)
    add_output_options(parser, "op_decoding")
    args = parser.parse_args()
    run = Run("op_decoding", args.results)
    dicts = operations(args.lines)
    data = b"\n".join(orjson.dumps(d) for d in dicts)
    decoder = msgspec.json.Decoder(OpStruct)
    floor_lines = best_of(lambda: [decoder.decode(line) for line in data.split(b"\n")], 3)
    lines = best_of(lambda: read_batch(data, "default"), 3)
    encoder = msgspec.json.Encoder()  # dict -> JSON -> struct: msgspec's fastest way from a dict
    floor_dicts = best_of(lambda: [decoder.decode(encoder.encode(d)) for d in dicts], 3)
    api = best_of(lambda: [parse_operation(d) for d in dicts], 3)
    rows = [{"path": "pmem apply lines (read_batch)", "seconds": round(lines, 3), "ops/s": round(args.lines / lines),
             "floor s": round(floor_lines, 3)},
            {"path": "Python API dicts (parse_operation)", "seconds": round(api, 3), "ops/s": round(args.lines / api),
             "floor s": round(floor_dicts, 3)}]
    run.table(rows, f"Decoding and validating {args.lines:,} operations (best of 3)")
    run.beside("read_batch", lines, "msgspec lines -> structs", floor_lines, "s")
    run.beside("parse_operation", api, "msgspec dicts -> structs", floor_dicts, "s")
    run.figures.update(lines=args.lines, read_batch_s=lines, parse_operation_s=api)
    run.finish()


if __name__ == "__main__":
    main()
