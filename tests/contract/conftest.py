"""The stores the contract suite runs against: the local store (``pmem.open``) and the remote one
(``pmem.connect`` to a real ``pmem serve`` app under uvicorn, driven over real HTTP with a token), each on
SQLite and on PostgreSQL.

One database and one server per backend for the whole session; each test gets a namespace of its own
(and, remotely, a credential for it), so tests do not see each other's cells. Event indices are global,
so tests read them from receipts instead of counting from 1. The credential's source is ``contract``
and its trust cap 100, so that a write naming that source and its trust records the same evidence on
both stores (a remote write without a trust gets the cap, docs/server.md).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

import pmem
from pmem.adapters.servers.http_api import create_app
from pmem.adapters.servers.limits import Limits
from pmem.adapters.service.credentials import Credentials
from tests.conftest import PG_URL, SKIP_PG, Backend
from tests.server.http_servers import free_port

SOURCE = "contract"
SETTINGS = {"embedder": "hashing"}  # no model to load: the contract is about the API, not retrieval quality


@dataclass
class Served:
    """One backend's database, served over HTTP at ``url``."""

    db: str
    url: str
    admin: pmem.Store  # the store itself, for credentials

    def token(self, *namespaces: str, read_only: bool = False, max_trust: int = 100) -> str:
        return Credentials(self.admin.projection_db).add(list(namespaces), SOURCE, max_trust, read_only)[1]


@contextmanager
def uvicorn_serving(db: str, limits: Limits | None = None) -> Iterator[str]:
    """``pmem serve``'s app over ``db`` under uvicorn on a thread of this process; its URL once started."""
    import uvicorn

    port = free_port()
    config = uvicorn.Config(create_app(db, settings=SETTINGS, limits=limits), host="127.0.0.1", port=port,
                            log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


@pytest.fixture(scope="session", params=["sqlite", "postgres"])
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    if request.param == "postgres":
        if SKIP_PG:
            pytest.skip("PostgreSQL cases skipped on request (PMEM_TEST_SKIP_PG=1)")
        if not PG_URL:
            pytest.fail("PMEM_TEST_PG is not set: run scripts/test.sh, or set PMEM_TEST_SKIP_PG=1")
    tmp = tmp_path_factory.mktemp(f"contract-{request.param}")
    backend = Backend(request.param, tmp)
    mp = pytest.MonkeyPatch()
    mp.setenv("PMEM_CACHE_DIR", str(tmp / "cache"))  # the FAISS and embedding caches of this session
    db = backend.new_url()
    try:
        with pmem.open(db, **SETTINGS) as admin, uvicorn_serving(db) as url:
            yield Served(db, url, admin)
    finally:
        backend.drop()
        mp.undo()


@pytest.fixture
def namespace() -> str:
    return f"t{uuid.uuid4().hex[:12]}"


@pytest.fixture(params=["local", "remote"])
def store(request: pytest.FixtureRequest, served: Served, namespace: str) -> Iterator[Any]:
    """A store whose default namespace is this test's: the local one, or the remote one over HTTP."""
    if request.param == "local":
        with pmem.open(served.db, namespace=namespace, **SETTINGS) as local:
            yield local
    else:
        with pmem.connect(served.url, served.token(namespace), namespace=namespace) as remote:
            yield remote


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The PostgreSQL half is in the postgres tier, as the root conftest tags its ``backend`` cases."""
    for item in items:
        if getattr(getattr(item, "callspec", None), "params", {}).get("served") == "postgres":
            item.add_marker(pytest.mark.postgres)
