"""The graph walkthrough of docs/graph.md runs as written (its own file, so it stays apart from the others)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

from tests.conftest import PMEM_BIN, ROOT
from tests.e2e.test_readme import block


def test_every_graph_command_of_the_docs_runs(tmp_path: Path) -> None:
    env = {**os.environ, "PMEM_DB": str(tmp_path / "mem.db")}
    ran = 0
    for line in block("sh", "## Walkthrough", "docs/graph.md").splitlines():
        cmd = line.split("  #")[0].strip()
        if not cmd.startswith("pmem "):
            continue
        r = subprocess.run([PMEM_BIN, *shlex.split(cmd)[1:]], cwd=ROOT, env=env, capture_output=True)
        assert r.returncode == 0, (cmd, r.stderr)
        out = r.stdout.decode()
        if "--format" in cmd:
            assert out.startswith(("digraph", "<!doctype html>"))
        else:
            assert [json.loads(x) for x in out.splitlines()]
        ran += 1
    assert ran == 7
