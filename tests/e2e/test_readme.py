"""The documentation is executed: its Python examples run, and every command of its walkthroughs works.

The examples live in README.md and in the pages of docs/; ``block`` finds a code block inside a named
section of a named page, so a section that moves or disappears fails here instead of going untested.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

from tests.conftest import PMEM_BIN, ROOT, SHARED

FENCE = re.compile(r"^\s*(```|~~~)")


def section(heading: str, page: str = "README.md") -> str:
    """The section of ``page`` (a path from the repository root) that starts at the heading line
    beginning with ``heading``, up to the next heading of the same or a higher level (headings inside
    code blocks do not count)."""
    lines = (ROOT / page).read_text().splitlines(keepends=True)
    level = len(heading) - len(heading.lstrip("#"))
    start = next((i for i, line in enumerate(lines) if line.startswith(heading)), None)
    assert start is not None, f"{page} has no section {heading!r}"
    fenced = False
    for i in range(start + 1, len(lines)):
        line = lines[i]
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and (m := re.match(r"(#{1,6})\s", line)) and len(m.group(1)) <= level:
            return "".join(lines[start:i])
    return "".join(lines[start:])


def block(lang: str, heading: str, page: str = "README.md") -> str:
    """The first ``lang`` code block of the section ``heading`` of ``page``."""
    m = re.compile(rf"```{lang}\n(.*?)```", re.S).search(section(heading, page))
    assert m is not None, f"{page}, {heading!r}: no {lang} block"
    return m.group(1)


def run_python(code: str, where: Path, name: str) -> dict[str, object]:
    old = Path.cwd()
    os.chdir(where)
    try:
        scope: dict[str, object] = {}
        exec(compile(code, name, "exec"), scope)
        return scope
    finally:
        os.chdir(old)


def test_the_readme_python_quickstart_runs(tmp_path: Path) -> None:
    run_python(block("python", "## Python quickstart"), tmp_path, "README.md")


def test_the_python_api_tour_runs(tmp_path: Path) -> None:
    run_python(block("python", "## A tour", "docs/python-api.md"), tmp_path, "docs/python-api.md")


def test_every_cli_example_runs_and_prints_json(tmp_path: Path) -> None:
    (tmp_path / "ops.jsonl").write_text(block("json", "## CLI quickstart"))
    env = {**os.environ, "PMEM_DB": str(tmp_path / "mem.db")}
    ran = 0
    for line in block("sh", "## CLI quickstart").splitlines():
        cmd = line.split("#")[0].strip()
        if not cmd.startswith("pmem "):
            continue
        r = subprocess.run([PMEM_BIN, *shlex.split(cmd)[1:]], cwd=tmp_path, env=env, capture_output=True)
        assert r.returncode == 0, (cmd, r.stderr)
        for out in r.stdout.decode().splitlines():
            json.loads(out)
        ran += 1
    assert ran >= 8
    r = subprocess.run([PMEM_BIN, "history", "5K PB"], cwd=tmp_path, env=env, capture_output=True)
    statuses = [v["status"] for v in json.loads(r.stdout)["versions"]]
    assert statuses == ["superseded", "revoked", "active"]  # 27:12, 25:50 revoked, then re-accepted


def test_the_readme_names_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "scripts/demo.sh" in readme and "scripts/test.sh" in readme
    assert "scripts/test.sh" in (ROOT / ".ci" / "run").read_text()


FC_CONTEXT = "factconsolidation_6k_context.txt"


def fc_context() -> Path | None:
    """The FactConsolidation 6k context, from the repository's test data or the shared data folder."""
    found = sorted((ROOT / "tests" / "data").rglob(FC_CONTEXT))
    shared = SHARED / "data" / "factconsolidation" / FC_CONTEXT
    return found[0] if found else shared if shared.is_file() else None


def test_the_ingest_walkthrough_runs_as_written(tmp_path: Path) -> None:
    page, heading = "docs/ingest.md", "## Writing from language"
    (tmp_path / "notes.txt").write_text(block("text", heading, page))
    fc = fc_context()
    if fc is not None:
        (tmp_path / FC_CONTEXT).symlink_to(fc)
    env = {**os.environ, "PMEM_DB": str(tmp_path / "mem.db")}
    outputs: dict[str, list[dict[str, object]]] = {}
    for line in block("sh", heading, page).splitlines():
        cmd = line.split("#")[0].strip()
        if not cmd.startswith("pmem "):
            continue
        if "fc.db" in cmd and fc is None:
            continue  # the FactConsolidation file is not here: that part of the walkthrough skips
        r = subprocess.run([PMEM_BIN, *shlex.split(cmd)[1:]], cwd=tmp_path, env=env, capture_output=True)
        assert r.returncode == 0, (cmd, r.stderr)
        outputs[cmd] = [json.loads(out) for out in r.stdout.decode().splitlines()]
    receipts = outputs["pmem ingest notes.txt"]
    assert [r["op"] for r in receipts] == ["accept", "accept", "revoke", "accept", "contest", "noop"]
    assert outputs['pmem get "mug 1.location"'][0]["value"] == "cabinet 2"
    pb = outputs['pmem get "5K PB"'][0]
    assert (pb["value"], pb["status"], pb["alternatives"]) == ("25:50", "contested", ["24:59"])
    if fc is not None:
        assert len(outputs["pmem frontier --db fc.db"]) == 294


def test_the_embedder_example_runs(tmp_path: Path) -> None:
    scope = run_python(block("python", "## The offline embedder", "docs/embedders.md"), tmp_path,
                       "docs/embedders.md")
    assert scope["vectors"].shape == (2, 384)  # type: ignore[attr-defined]


def test_the_default_embedder_example_runs() -> None:
    code = block("python", "## Search embeds with the offline model by default", "docs/search.md")
    exec(compile(code, "docs/search.md", "exec"), {})

