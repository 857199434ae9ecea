"""The soft-key walkthrough of docs/ingest.md runs as written (the LLM line needs a server and is skipped)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

from tests.conftest import PMEM_BIN
from tests.e2e.test_readme import block

PAGE, HEADING = "docs/ingest.md", "## Soft key identity"


def test_the_soft_key_walkthrough_merges_reads_and_unmerges(tmp_path: Path) -> None:
    (tmp_path / "pb.txt").write_text(block("text", HEADING, PAGE))
    env = {**os.environ, "PMEM_DB": str(tmp_path / "mem.db")}
    outputs = []
    for line in block("sh", HEADING, PAGE).splitlines():
        cmd = line.split("#")[0].strip()
        if not cmd.startswith("pmem ") or "--extractor llm" in cmd:
            continue
        r = subprocess.run([PMEM_BIN, *shlex.split(cmd)[1:]], cwd=tmp_path, env=env, capture_output=True)
        assert r.returncode == 0, (cmd, r.stderr)
        outputs.append([json.loads(out) for out in r.stdout.decode().splitlines()])
    ingest, get, unmerge = outputs
    assert [r["key"] for r in ingest] == ["5k_pb", "_alias.personal_best_over_5_km", "5k_pb"]
    assert get[0]["value"] == "24:59"
    assert unmerge[0]["head"]["value"] == "personal_best_over_5_km"


def test_the_embedder_choice_example_runs() -> None:
    code = block("python", "## Choosing the embedder", "docs/embedders.md")
    exec(compile(code, "docs/embedders.md", "exec"), {})
