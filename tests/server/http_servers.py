"""Real ``pmem serve`` processes for the HTTP API tests: each on a free port, polled on ``/healthz``
until it answers, stopped with SIGTERM after the test. The embedder is ``hashing`` (no model to load):
these tests are about the protocol and the policy, not retrieval quality."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import PMEM_BIN

EMBEDDER = ["--embedder", "hashing"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pmem(db: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PMEM_BIN, "--db", db, *args], capture_output=True, text=True, timeout=120)


def add_key(db: str, *namespaces: str, source: str, max_trust: int, read_only: bool = False) -> dict[str, Any]:
    """``pmem keys add``: the printed ``{"key_id", "token", ...}``."""
    ns = [a for n in namespaces for a in ("--namespace", n)]
    out = pmem(db, "keys", "add", *ns, "--source", source, "--max-trust", str(max_trust),
               *(["--read-only"] if read_only else []))
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout))


@contextmanager
def serving(db: str, *extra: str, cache: Path | None = None) -> Iterator[str]:
    """``pmem serve`` over ``db`` on a free port; its base URL once ``/healthz`` answers."""
    with served(db, *extra, cache=cache) as (url, _):
        yield url


@contextmanager
def served(db: str, *extra: str, cache: Path | None = None) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """:func:`serving`, with the server's process."""
    port = free_port()
    env = dict(os.environ)
    if cache is not None:
        env["PMEM_CACHE_DIR"] = str(cache)  # each process its own local caches (FAISS index, embeddings)
    proc = subprocess.Popen([PMEM_BIN, "--db", db, *EMBEDDER, "serve", "--port", str(port), *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"pmem serve exited {proc.returncode}: "
                                     f"{proc.stderr.read().decode() if proc.stderr else ''}")
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "pmem serve did not start"
            time.sleep(0.1)
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
