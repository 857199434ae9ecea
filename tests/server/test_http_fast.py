"""The short way for the hot reads (:mod:`pmem.adapters.servers.http_fast`) and the joined writes of the
server's protocol (:mod:`pmem.adapters.servers.http_protocol`).

- Every request below, valid or not, gets the same status, body and headers from an app with the short
  way as from one without it (FastAPI alone), over one real store: the short way changes only speed.
- The plainly valid ``get`` and ``search`` requests do take the short way, and the others do not.
- Writes joined in one turn of the event loop reach the peer whole and in order, over a real socket.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import pmem
from pmem.adapters.servers.http_api import create_app
from pmem.adapters.servers.http_fast import bearer_token, hot_read
from pmem.adapters.servers.http_protocol import JoinedWrites
from pmem.adapters.service.credentials import Credentials

PLAIN = ["/v1/cells/home", "/v1/cells/home?as_of=0", "/v1/cells/home?as_of=3&disclose=history,alternatives",
         "/v1/cells/caf%C3%A9?namespace=a", "/v1/cells/nothing", "/v1/cells/home?namespace=b",
         "/v1/cells/home?namespace=", "/v1/search?q=home", "/v1/search?q=item", "/v1/search?q=paris&k=1",
         "/v1/search?q=x&k=100",
         "/v1/search?q=home&ranking=vector&as_of=2", "/v1/search?q=home&namespace=b",
         "/v1/cells/%20?disclose=", "/v1/cells/home?disclose=bogus"]
OTHERS = ["/v1/cells/home?as_of=-1", "/v1/cells/home?as_of=01", "/v1/cells/home?as_of=abc",
          "/v1/cells/home?as_of=99999999999999999999999", "/v1/cells/home?as_of=1&as_of=2", "/v1/cells/home?x=1",
          "/v1/cells/", "/v1/cells/a%2Fb", "/v1/cells/home/history", "/v1/search", "/v1/search?q=",
          "/v1/search?q=home&k=0", "/v1/search?q=home&k=101", "/v1/search?q=home&k=%EF%BC%95",
          "/v1/search?q=home&ranking=bogus", "/v1/search?q=a&q=b", "/v1/search?q=home&k=+3", "/v1/search/"]
AUTH = ["Bearer {token}", "bearer {token}", "Bearer  {token} ", None, "Basic {token}", "Bearer", "Bearer pmem_x_y",
        "Bearer {other}"]


@pytest.fixture(scope="module")
def apps(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, TestClient, dict[str, str]]]:
    db = str(tmp_path_factory.mktemp("fast") / "mem.db")
    with pmem.open(db, embedder="hashing") as store:
        store.apply([{"op": "accept", "key": k, "value": v, "namespace": ns} for k, v, ns in
                     (("home", "Paris", "a"), ("café", "open", "a"), ("home", "Rome", "b"), ("pet", "cat", "a"))])
        store.apply([{"op": "accept", "key": "home", "value": "Lyon", "namespace": "a", "trust": 20}])
        store.apply([{"op": "accept", "key": f"item {i}", "value": f"value {i}", "namespace": "a"} for i in range(30)])
        tokens = {"token": Credentials(store.projection_db).add(["a"], "agent-a", 60)[1],
                  "other": Credentials(store.projection_db).add(["b"], "agent-b", 40)[1]}
    settings = {"embedder": "hashing"}
    with (TestClient(create_app(db, settings=settings)) as fast,
          TestClient(create_app(db, settings=settings, fast_reads=False)) as plain):
        yield fast, plain, tokens


def _answer(client: TestClient, path: str, auth: str | None) -> tuple[int, Any, dict[str, str | None]]:
    r = client.get(path, headers={} if auth is None else {"Authorization": auth})
    kept = {h: r.headers.get(h) for h in ("content-type", "www-authenticate", "retry-after")}
    return r.status_code, r.json(), kept


@pytest.mark.parametrize("path", PLAIN + OTHERS)
def test_the_short_way_answers_as_fastapi_does(apps: tuple[TestClient, TestClient, dict[str, str]], path: str) -> None:
    fast, plain, tokens = apps
    for auth in AUTH:
        header = None if auth is None else auth.format(**tokens)
        assert _answer(fast, path, header) == _answer(plain, path, header), (path, auth)


def _scope(target: str, auth: bytes | None = None) -> dict[str, Any]:
    from urllib.parse import unquote

    path, _, query = target.partition("?")
    return {"type": "http", "method": "GET", "path": unquote(path), "query_string": query.encode(),
            "headers": [] if auth is None else [(b"authorization", auth)]}


def test_only_plainly_valid_hot_reads_take_the_short_way() -> None:
    assert all(hot_read(_scope(p)) is not None for p in PLAIN)
    assert [p for p in OTHERS if hot_read(_scope(p)) is not None] == []
    assert hot_read(_scope("/v1/frontier")) is None and hot_read(_scope("/healthz")) is None


def test_the_token_is_read_as_fastapis_bearer_reads_it() -> None:
    assert bearer_token(_scope("/", b"Bearer  abc ")) == "abc"
    assert bearer_token(_scope("/", b"bEaReR abc")) == "abc"
    assert [bearer_token(_scope("/", a)) for a in (None, b"Basic abc", b"Bearer", b"Bearer ", b"")] == [None] * 5


def test_joined_writes_reach_the_peer_whole_and_in_order() -> None:
    """Three writes in one turn of the loop: one write to the socket transport; close sends what is pending."""

    async def run() -> tuple[bytes, list[int], bytes]:
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair()
        transport, _ = await loop.create_connection(asyncio.Protocol, sock=ours)
        sent: list[int] = []
        write = transport.write
        transport.write = lambda data: (sent.append(len(data)), write(data))[1]  # type: ignore[method-assign]
        joined = JoinedWrites(transport, loop)  # type: ignore[arg-type]
        joined.write(b"HTTP/1.1 200 OK\r\n\r\n")
        joined.write(b"")
        joined.write(b"{\"a\": 1}")
        joined.writelines([b"!"])
        assert sent == []
        await asyncio.sleep(0)
        theirs.settimeout(5)
        first = theirs.recv(1000)
        joined.write(b"last")
        joined.close()
        for _ in range(3):  # the transport closes its socket in a later turn of the loop
            await asyncio.sleep(0)
        rest = b""
        while chunk := theirs.recv(1000):
            rest += chunk
        theirs.close()
        return first, sent, rest

    first, sent, rest = asyncio.run(run())
    assert first == b"HTTP/1.1 200 OK\r\n\r\n{\"a\": 1}!"
    assert sent == [len(first), 4] and rest == b"last"


def test_a_served_store_answers_hot_reads_through_the_short_way(tmp_path: Path) -> None:
    """The app ``pmem serve`` builds has the short way in front of its router (the default)."""
    app = create_app(str(tmp_path / "mem.db"), insecure_local=True, settings={"embedder": "hashing"})
    assert any(m.cls.__name__ == "FastReads" for m in app.user_middleware)
