"""Shared fixtures: real stores on SQLite files in temporary directories."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import pmem

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
PMEM_BIN = str(Path(sys.executable).parent / "pmem")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "mem.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[pmem.Store]:
    with pmem.open(db_path) as s:
        yield s
