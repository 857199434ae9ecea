"""The reliability suite (issue 7): real processes, real kills, real storage failures.

Every test here is marked ``reliability`` (select with ``-m reliability``, leave out with
``-m "not reliability"``) and ``slow``. Tests that hold for every backend take the ``backend``
fixture; today it yields only ``sqlite``. The PostgreSQL backend adds ``postgres`` to
:data:`BACKENDS` and a branch to :func:`new_store_url` and :func:`integrity_check`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
WORKERS = Path(__file__).with_name("workers.py")
PMEM_BIN = str(Path(sys.executable).parent / "pmem")
BACKENDS = ("sqlite",)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.reliability)
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def new_store_url(backend: str, directory: Path, name: str = "mem") -> str:
    """A fresh, empty store of ``backend``: what ``pmem --db`` and ``pmem.open`` take."""
    if backend == "sqlite":
        return str(directory / f"{name}.db")
    raise AssertionError(f"no store for backend {backend!r}")


def integrity_check(store: Any) -> str:
    """The backend's own integrity check of the store's database: ``"ok"`` when sound."""
    return str(store.log_store.recorder.integrity_check())


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a child process: this repository importable, fsync on every commit."""
    env = dict(os.environ, PMEM_SYNCHRONOUS="FULL", **extra)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return env
