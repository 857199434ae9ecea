"""The shared conformance tool drives the installed ``pmem`` against its reference model of the rules
(edition 2: Unicode keys, trust guarding every version an operation would close), on each
backend. The tool names its own SQLite file; on PostgreSQL a small wrapper swaps that ``--db`` for the
URL of a fresh schema, so the tool drives ``pmem --db postgresql://...``.

An extra check: the tool lives in the shared workspace beside this repository (``../shared/tools``), not
in it, so a clone of the repository alone skips this file, saying so. The same semantics are checked
without it by the reference model in ``tests/reference_model.py`` (``test_stateful.py``,
``test_time_travel.py``, ``reliability/test_concurrent_writers.py``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PMEM_BIN, SHARED, Backend

TOOL = SHARED / "tools" / "conformance.py"
PG_SKIPS = {7, 11}
SWAP_DB = """#!{python}
import os, sys
args = sys.argv[1:]
if "--db" in args:
    args[args.index("--db") + 1] = {url!r}
os.execv({pmem!r}, [{pmem!r}, *args])
"""


def pmem_for(backend: Backend, tmp_path: Path) -> str:
    if backend.name == "sqlite":
        return PMEM_BIN
    wrapper = tmp_path / "pmem-pg"
    wrapper.write_text(SWAP_DB.format(python=sys.executable, url=backend.new_url(), pmem=PMEM_BIN))
    wrapper.chmod(0o755)
    return str(wrapper)


@pytest.mark.skipif(not TOOL.exists(), reason=f"optional extra check: the shared conformance tool {TOOL} "
                                                "is not present (it lives in ../shared/tools, outside this repository)")
@pytest.mark.parametrize("seed", [1, 2, 3, 7, 11])
def test_pmem_agrees_with_the_shared_reference_model(backend: Backend, tmp_path: Path, seed: int) -> None:
    if backend.name == "postgres" and seed in PG_SKIPS:
        pytest.skip("each tool step starts a pmem process against the server: three seeds on PostgreSQL")
    r = subprocess.run([sys.executable, str(TOOL), "--pmem", pmem_for(backend, tmp_path), "--seed", str(seed),
                        "--keys", "60", "--steps", "25", "--spec", "2"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 applied flags differ; as-of mismatches at none" in r.stdout
