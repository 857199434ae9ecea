"""``pmem stats`` counts what the log holds at once, whatever the projections have caught up (both backends)."""

from __future__ import annotations

import json

from tests.cli_runner import run_cli


def _pmem(db: str, *args: str, stdin: bytes | None = None) -> bytes:
    r = run_cli(["--db", db, *args], stdin=stdin)
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    return r.stdout


def test_stats_right_after_apply_counts_every_cell_and_namespace_and_each_projection_s_lag(db: str) -> None:
    n = 1500
    ops = [{"op": "accept", "key": f"k{i}", "value": f"v{i}", "namespace": f"ns{i % 3}"} for i in range(n)]
    ops += [{"op": "accept", "key": "k7", "value": "again", "namespace": "ns1"}]  # a cell's second event
    _pmem(db, "apply", "-", stdin=b"\n".join(json.dumps(o).encode() for o in ops))
    stats = json.loads(_pmem(db, "stats"))
    assert (stats["events"], stats["cells"], stats["namespaces"]) == (n + 1, n, 3)
    assert stats["projections"]["frontier"]["lag"] == n + 1 - stats["projections"]["frontier"]["position"]
    assert {p["lag"] for p in stats["projections"].values()} == {n + 1}  # nothing caught up, cells counted anyway
