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


@pytest.mark.parametrize("breaker", ["\x85", "\u2028", "\u2029"])
def test_a_value_holding_a_unicode_line_break_stays_on_one_line(breaker: str,
                                                                capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    value = f"a{breaker}b é {breaker}"
    cli_common.emit_lines([{"value": value}, {"i": 1}])
    out = capsysbinary.readouterr().out.decode()
    assert len(out.splitlines()) == 2  # str.splitlines breaks at U+0085, U+2028 and U+2029 too
    assert [orjson.loads(line) for line in out.splitlines()] == [{"value": value}, {"i": 1}]
    assert cli_common.json_line({"v": "plain é"}) == orjson.dumps({"v": "plain é"}) + b"\n"  # others untouched

