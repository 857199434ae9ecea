"""The shared conformance tool drives the installed ``pmem`` against SPEC §3's reference model."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import PMEM_BIN, SHARED

TOOL = SHARED / "tools" / "conformance.py"


@pytest.mark.skipif(not TOOL.exists(), reason=f"{TOOL} is not present")
@pytest.mark.parametrize("seed", [1, 2, 3, 7, 11])
def test_pmem_agrees_with_the_shared_reference_model(seed: int) -> None:
    r = subprocess.run([sys.executable, str(TOOL), "--pmem", PMEM_BIN, "--seed", str(seed), "--keys", "60",
                        "--steps", "25"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 applied flags differ; as-of mismatches at none" in r.stdout
