"""The shared conformance tool passes on an imported store: a wrapper ``pmem`` applies the tool's batch to a
SQLite staging file, copies it (``pmem copy --to``) into a new store of the ``backend`` under test, and
answers every read (``frontier``, ``frontier --as-of N``) from the copy. The receipts the tool checks
are the staging store's; the frontiers, the imported store's.

An extra check, like tests/e2e/test_conformance.py: the tool lives in the shared workspace beside this
repository, so a clone of the repository alone skips this file, saying so."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PMEM_BIN, SHARED, Backend

TOOL = SHARED / "tools" / "conformance.py"
COPY_THEN_READ = """#!{python}
import os, subprocess, sys
args = sys.argv[1:]
staging, target = {staging!r}, {target!r}
if "apply" in args:
    args[args.index("--db") + 1] = staging
    r = subprocess.run([{pmem!r}, *args])
    if r.returncode == 0:
        c = subprocess.run([{pmem!r}, "--db", staging, "copy", "--to", target, "--verify"], capture_output=True)
        if c.returncode != 0:
            sys.stderr.write(c.stderr.decode())
            sys.exit(c.returncode)
    sys.exit(r.returncode)
args[args.index("--db") + 1] = target
os.execv({pmem!r}, [{pmem!r}, *args])
"""


@pytest.mark.skipif(not TOOL.exists(), reason=f"optional extra check: the shared conformance tool {TOOL} "
                                                "is not present (it lives in ../shared/tools, outside this repository)")
@pytest.mark.parametrize("seed", [1, 7])
def test_the_conformance_tool_passes_on_an_imported_store(backend: Backend, tmp_path: Path, seed: int) -> None:
    wrapper = tmp_path / "pmem-copied"
    wrapper.write_text(COPY_THEN_READ.format(python=sys.executable, staging=str(tmp_path / "staging.db"),
                                             target=backend.new_url(), pmem=PMEM_BIN))
    wrapper.chmod(0o755)
    r = subprocess.run([sys.executable, str(TOOL), "--pmem", str(wrapper), "--seed", str(seed),
                        "--keys", "60", "--steps", "25", "--spec", "2"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 applied flags differ; as-of mismatches at none" in r.stdout
