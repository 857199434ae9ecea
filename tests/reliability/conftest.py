"""The reliability suite: real processes, real kills, real storage failures.

Every test here is marked ``reliability`` (select with ``-m reliability``, leave out with
``-m "not reliability"``) and ``slow``. Tests that hold for every backend take the ``backend``
fixture, which yields ``sqlite`` and ``postgres``: PostgreSQL from ``PMEM_TEST_PG``, under the rules
of ``tests/conftest.py`` (without it the PostgreSQL cases FAIL, unless ``PMEM_TEST_SKIP_PG=1`` skips
them). Each PostgreSQL store is a fresh schema, dropped when the module's tests are done; its local
caches (FAISS index, embeddings) go to a temporary ``PMEM_CACHE_DIR`` that child processes inherit.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PG_URL, SKIP_PG

REPO = Path(__file__).resolve().parents[2]
WORKERS = Path(__file__).with_name("workers.py")
PMEM_BIN = str(Path(sys.executable).parent / "pmem")
BACKENDS = ("sqlite", "postgres")
_SCHEMAS: list[str] = []  # PostgreSQL schemas made by new_store_url, dropped by the backend fixture


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.reliability)
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if request.param == "sqlite":
        yield "sqlite"
        return
    if SKIP_PG:
        pytest.skip("PostgreSQL cases skipped on request (PMEM_TEST_SKIP_PG=1)")
    if not PG_URL:
        pytest.fail("PMEM_TEST_PG is not set: run scripts/test.sh (it starts a throwaway PostgreSQL), "
                    "or set PMEM_TEST_SKIP_PG=1 to skip the PostgreSQL cases")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PMEM_CACHE_DIR", str(tmp_path_factory.mktemp("pmem-cache")))
        try:
            yield "postgres"
        finally:
            drop_schemas()


def new_store_url(backend: str, directory: Path, name: str = "mem") -> str:
    """A fresh, empty store of ``backend``: what ``pmem --db`` and ``pmem.open`` take (a SQLite file
    in ``directory``, or a new schema on the ``PMEM_TEST_PG`` server)."""
    if backend == "sqlite":
        return str(directory / f"{name}.db")
    if backend == "postgres":
        schema = f"r_{name}_{uuid.uuid4().hex[:12]}"
        _SCHEMAS.append(schema)
        return f"{PG_URL}?schema={schema}"
    raise AssertionError(f"no store for backend {backend!r}")


def drop_schemas() -> None:
    import psycopg

    from pmem.adapters.storage.backend import PgBackend

    with psycopg.connect(**PgBackend.from_url(PG_URL).conninfo, autocommit=True) as conn:
        while _SCHEMAS:
            conn.execute(f'DROP SCHEMA IF EXISTS "{_SCHEMAS.pop()}" CASCADE')


def integrity_check(store: Any) -> str:
    """The backend's own integrity check of the store's database: ``"ok"`` when sound."""
    return str(store.log_store.recorder.integrity_check())


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a child process: this repository importable, fsync on every commit."""
    env = dict(os.environ, PMEM_SYNCHRONOUS="FULL", **extra)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return env
