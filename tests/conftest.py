"""Shared fixtures: real stores on SQLite files in temporary directories, and on PostgreSQL.

``db`` is a store name on each backend in turn (the contract suite): a SQLite file in ``tmp_path``,
or a fresh schema on the server named by ``PMEM_TEST_PG`` (``scripts/test.sh`` starts a throwaway
cluster and sets it). Without ``PMEM_TEST_PG`` the PostgreSQL cases FAIL, so CI cannot pass without
them; a developer without PostgreSQL skips them explicitly with ``PMEM_TEST_SKIP_PG=1``.
``db_path`` is a SQLite file: tests that take it are SQLite-only (file PRAGMAs, WAL, cache files
next to the store) and say why.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from hypothesis import HealthCheck, settings

import pmem

# Tests are never timed: the machines that run them are shared and noisy, so Hypothesis neither
# fails a slow example (deadline) nor a slow generator (too_slow); every example still asserts.
settings.register_profile("pmem", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("pmem")

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
PMEM_BIN = str(Path(sys.executable).parent / "pmem")
PG_URL = os.environ.get("PMEM_TEST_PG", "")
SKIP_PG = os.environ.get("PMEM_TEST_SKIP_PG", "") == "1"
# The share of each Hypothesis test's examples to run: 1 in the full suite, less in the fast tier
# (scripts/test.sh --fast), which is run again and again while working.
EXAMPLE_SHARE = float(os.environ.get("PMEM_TEST_EXAMPLE_SHARE", "1"))


def examples(n: int) -> int:
    """``n`` Hypothesis examples, scaled by the tier's share (at least 1)."""
    return max(1, round(n * EXAMPLE_SHARE))


class Backend:
    """Fresh, isolated stores on one backend for one test; the PostgreSQL schemas are dropped after."""

    def __init__(self, name: str, tmp_path: Path) -> None:
        self.name, self.tmp_path = name, tmp_path
        self.schemas: list[str] = []
        self.databases: list[str] = []

    def max_examples(self, sqlite: int, postgres: int) -> int:
        """For Hypothesis tests: how many examples to run on this backend. A PostgreSQL example opens
        stores over a socket, each a round trip slower than a SQLite file's, so PostgreSQL runs fewer; every example
        that runs asserts. Use it in ``settings(max_examples=...)`` of a ``@given`` function defined inside
        the test, since the backend is only known there."""
        return examples(sqlite if self.name == "sqlite" else postgres)

    def new_url(self, stem: str = "mem") -> str:
        """The name of a new, empty store."""
        if self.name == "sqlite":
            return str(self.tmp_path / f"{stem}-{uuid.uuid4().hex[:8]}.db")
        schema = f"t_{uuid.uuid4().hex[:16]}"
        self.schemas.append(schema)
        return f"{PG_URL}?schema={schema}"

    def new_database_url(self) -> str:
        """A new, empty store; on PostgreSQL in a database of its own, for a test that other tests' work in
        the shared database would disturb: NOTIFY channels and ``VACUUM``'s horizon are per database."""
        if self.name == "sqlite":
            return self.new_url()
        import psycopg

        from pmem.adapters.storage.backend import PgBackend

        db = f"t_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(**PgBackend.from_url(PG_URL).conninfo, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{db}"')
        self.databases.append(db)
        return urlunsplit(urlsplit(PG_URL)._replace(path=f"/{db}"))

    def fresh_projection_db(self) -> Any:
        """A separate, empty database for a projection built from scratch (the same interface the store uses)."""
        if self.name == "sqlite":
            return sqlite3.connect(":memory:", isolation_level=None)
        from pmem.adapters.storage.backend import PgBackend

        backend = PgBackend.from_url(self.new_url())
        with backend.setting_up():
            pass
        return backend.connect_projections()

    def drop(self) -> None:
        if not self.schemas and not self.databases:
            return
        import psycopg

        from pmem.adapters.storage.backend import PgBackend

        with psycopg.connect(**PgBackend.from_url(PG_URL).conninfo, autocommit=True) as conn:
            for schema in self.schemas:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            for db in self.databases:
                conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


# The fast tier (scripts/test.sh --fast) deselects these; tagging them here, not in each file, keeps a
# new PostgreSQL or browser test from slipping into it unmarked.
_BROWSER_DIR = Path(__file__).parent / "browser"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if params.get("backend") == "postgres" or "pg_url" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.postgres)
        if _BROWSER_DIR in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.browser)


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Backend]:
    if request.param == "postgres":
        if SKIP_PG:
            pytest.skip("PostgreSQL cases skipped on request (PMEM_TEST_SKIP_PG=1)")
        if not PG_URL:
            pytest.fail("PMEM_TEST_PG is not set: run scripts/test.sh (it starts a throwaway PostgreSQL), "
                        "or set PMEM_TEST_SKIP_PG=1 to skip the PostgreSQL cases")
        monkeypatch.setenv("PMEM_CACHE_DIR", str(tmp_path / "pmem-cache"))  # FAISS/embedding caches
    b = Backend(request.param, tmp_path)
    try:
        yield b
    finally:
        b.drop()


@pytest.fixture
def db(backend: Backend) -> str:
    """A new store's name on each backend: a SQLite file, or a PostgreSQL URL with a fresh schema."""
    return backend.new_url()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A SQLite file (SQLite-only tests)."""
    return tmp_path / "mem.db"


@pytest.fixture
def store(db: str) -> Iterator[pmem.Store]:
    with pmem.open(db) as s:
        yield s
