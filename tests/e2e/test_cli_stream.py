"""``pmem apply`` streams its input in chunks (``cli_common.CHUNK_LINES`` lines) inside ONE transaction,
on SQLite and on PostgreSQL: a bad line far into a large batch rolls back every chunk written before
it, with the same error as a small batch; op ids repeated across chunks get their first receipt."""

from __future__ import annotations

from pmem.adapters.entrypoints.cli_common import CHUNK_LINES
from tests.e2e.test_cli import error, ok, pmem


def _accepts(n: int, start: int = 0) -> bytes:
    """``n`` accept lines over 1,000 keys, each with its own op id."""
    return b"".join(b'{"op":"accept","key":"k%d","value":"v%d","op_id":"o%d"}\n' % (i % 1000, i, i)
                    for i in range(start, start + n))


def test_a_bad_line_100k_lines_into_a_batch_writes_nothing(db: str) -> None:
    before = ok(db, "apply", "-", stdin=_accepts(3))  # the store holds something already
    bad_at = 100_001
    batch = _accepts(bad_at - 1, 3) + b'{"op":"accept","key":"k1"}\n' + _accepts(50, bad_at + 3)
    assert bad_at > 20 * CHUNK_LINES  # many chunks were written into the transaction before the bad line
    r = pmem(db, "apply", "-", stdin=batch)
    assert r.returncode == 2
    assert error(r) == {"error": "invalid batch", "detail": f"line {bad_at}: missing 'value'"}
    log = ok(db, "log")
    assert [e["event_index"] for e in log] == [1, 2, 3]  # nothing of the batch, and no gap after it
    assert [e["event_index"] for e in ok(db, "apply", "-", stdin=_accepts(1, 7))] == [4]
    assert len(before) == 3


def test_op_ids_repeated_across_chunks_and_resent_batches_get_their_first_receipts(db: str) -> None:
    first = _accepts(CHUNK_LINES + 10)
    again = first[: first.index(b"\n") + 1]  # line 1 again, as the batch's last line (another chunk)
    receipts = ok(db, "apply", "-", stdin=first + again)
    assert len(receipts) == CHUNK_LINES + 11
    assert receipts[-1] == {**receipts[0], "duplicate": True}
    assert [r["event_index"] for r in receipts[:-1]] == list(range(1, CHUNK_LINES + 11))
    resent = ok(db, "apply", "-", stdin=first)
    assert resent == [{**r, "duplicate": True} for r in receipts[:-1]]
    assert len(ok(db, "log")) == CHUNK_LINES + 10
