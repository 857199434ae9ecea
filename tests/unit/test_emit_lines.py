"""The CLI writes its JSON lines a chunk at a time (a million receipts are never one buffer): every
line still comes out, once, in order, whatever the chunk size."""

from __future__ import annotations

import orjson
import pytest

from pmem.adapters.entrypoints import cli_common


@pytest.mark.parametrize("n", [0, 1, 6, 7, 13])
def test_every_line_comes_out_once_in_order(n: int, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    cli_common.emit_lines(({"i": i} for i in range(n)), chunk=3)
    out = capsysbinary.readouterr().out
    assert [orjson.loads(line) for line in out.splitlines()] == [{"i": i} for i in range(n)]
    assert out == b"".join(orjson.dumps({"i": i}) + b"\n" for i in range(n))
