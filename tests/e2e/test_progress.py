"""Progress bars: drawn on stderr when it is a terminal (a real pty here), silent when it is not or with
``--quiet``; stdout stays JSON either way."""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
from pathlib import Path

from pmem.adapters.progress import MIN_TOTAL, silent, terminal_progress, tracked
from tests.conftest import PMEM_BIN
from tests.e2e.test_cli import ok, pmem

EVENTS = 1_500  # more than MIN_TOTAL: a rebuild of them is long enough to earn a bar


def seed(db: Path) -> None:
    """EVENTS accepts over 10 keys cycling through 5 values: many versions, only 50 distinct texts."""
    ops = (json.dumps({"op": "accept", "key": f"k{i % 10}", "value": f"v{(i // 10) % 5}"}) for i in range(EVENTS))
    ok(db, "apply", "-", stdin="\n".join(ops).encode())


def on_a_terminal(db: Path, *args: str) -> tuple[bytes, str]:
    """Run ``pmem`` with stderr on a pseudo-terminal; return its stdout and what the terminal showed."""
    leader, follower = pty.openpty()
    with subprocess.Popen([PMEM_BIN, "--db", str(db), *args], stdout=subprocess.PIPE, stderr=follower) as p:
        os.close(follower)
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the process closed its end
                break
            if not chunk:
                break
            shown += chunk
        out = p.stdout.read() if p.stdout else b""
        assert p.wait() == 0, shown
    os.close(leader)
    return out, shown.decode(errors="replace")


class _Terminal(io.StringIO):
    """A text stream that says it is a terminal: a real, small stand-in for stderr on a tty."""

    def isatty(self) -> bool:
        return True


def test_a_rebuild_draws_a_bar_on_a_terminal_and_stdout_stays_json(db_path: Path) -> None:
    seed(db_path)
    out, shown = on_a_terminal(db_path, "rebuild")
    assert json.loads(out)["events"] == EVENTS
    assert "frontier" in shown and "vectors" in shown and "%|" in shown, shown


def test_quiet_silences_the_bar_even_on_a_terminal(db_path: Path) -> None:
    seed(db_path)
    out, shown = on_a_terminal(db_path, "--quiet", "rebuild")
    assert json.loads(out)["events"] == EVENTS and shown == ""
    out, shown = on_a_terminal(db_path, "rebuild", "-q")
    assert json.loads(out)["events"] == EVENTS and shown == ""


def test_nothing_is_drawn_when_stderr_is_not_a_terminal(db_path: Path) -> None:
    seed(db_path)
    r = pmem(db_path, "rebuild")
    assert r.returncode == 0 and r.stderr == b""
    records = "\n".join(f"My favourite colour is colour{i}." for i in range(MIN_TOTAL + 10)).encode()
    r = pmem(db_path, "ingest", "-", stdin=records)
    assert r.returncode == 0 and r.stderr == b"" and len(r.stdout.splitlines()) >= MIN_TOTAL


def test_short_work_and_quiet_or_piped_streams_get_no_bar() -> None:
    tty = _Terminal()
    bar = terminal_progress(tty)("ingest", MIN_TOTAL - 1)
    bar.update(MIN_TOTAL - 1)
    bar.close()
    assert tty.getvalue() == ""
    assert terminal_progress(_Terminal(), quiet=True) is silent
    assert terminal_progress(io.StringIO()) is silent


class _Tally:
    """A progress bar that counts what it is told: a real, small implementation of the Bar port."""

    def __init__(self, description: str, total: int) -> None:
        self.description, self.total, self.done, self.closed = description, total, 0, False
        made.append(self)

    def update(self, n: int = 1) -> None:
        self.done += n

    def close(self) -> None:
        self.closed = True


made: list[_Tally] = []


def test_tracked_yields_every_item_and_advances_the_bar_to_its_total() -> None:
    made.clear()
    assert list(tracked(range(7), 7, "ingest", _Tally)) == list(range(7))
    assert [(t.description, t.total, t.done, t.closed) for t in made] == [("ingest", 7, 7, True)]


def test_a_store_reports_its_rebuilds_and_catch_ups_to_the_progress_it_was_given(db_path: Path) -> None:
    seed(db_path)
    import pmem
    from pmem.adapters.embedders.hashing_embedder import HashingEmbedder

    made.clear()
    with pmem.open(db_path, progress=_Tally, embedder=HashingEmbedder()) as store:
        store.get("k1")
        store.rebuild()
    done = [(t.description, t.total, t.done, t.closed) for t in made if t.total]
    assert done == [("frontier", EVENTS, EVENTS, True),  # the read catches up the frontier
                    ("frontier", EVENTS, EVENTS, True),  # rebuild: all
                    ("graph+lexical", EVENTS, EVENTS, True),  # one pass over the log for both
                    ("vectors", EVENTS, EVENTS, True), ("embedding", EVENTS, EVENTS, True)]
