"""``pmem mcp`` as an MCP client meets it: real server processes, over stdio and over
streamable HTTP, driven by the official SDK's own client session, on a real SQLite store with real
credentials. The policy itself is GuardedStore's; these tests check that every path of the MCP server goes
through it: the trust cap, namespaces, read-only, revocation, and that bad input is a one-line tool error."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import msgspec
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

import pmem
from pmem.adapters.service.credentials import Credentials
from pmem.domain.op_schema import OPS, OpStruct
from tests.conftest import PMEM_BIN

TOOLS = {"remember", "apply", "get", "history", "search", "read", "what_next"}
BASE = ["--embedder", "hashing"]  # no model to load: these tests are about the protocol and the policy


class Keys:
    """The store's credentials as the tests use them: a writer and a reader in namespace ``a``."""

    def __init__(self, db: Path) -> None:
        self.db = db
        with pmem.open(db, namespace="a") as s:
            creds = Credentials(s.projection_db)
            (self.writer_id, self.writer), (_, self.reader) = (
                (c.key_id, t) for c, t in (creds.add(["a"], "agent-a", 60), creds.add(["a"], "viewer", 60, True)))

    def revoke(self, key_id: str) -> None:
        with pmem.open(self.db) as s:
            Credentials(s.projection_db).revoke(key_id)


@pytest.fixture
def keys(tmp_path: Path) -> Keys:
    return Keys(tmp_path / "mem.db")


@asynccontextmanager
async def stdio_session(db: Path, token: str | None, *extra: str) -> AsyncIterator[ClientSession]:
    env = {"PMEM_TOKEN": token} if token else {}
    params = StdioServerParameters(command=PMEM_BIN, args=["--db", str(db), *BASE, "mcp", *extra],
                                   env={**env, "PMEM_CACHE_DIR": str(db.parent / "cache")})
    with open(db.parent / "mcp-stderr.log", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (r, w), ClientSession(r, w) as session:
            await session.initialize()
            yield session


@asynccontextmanager
async def http_session(url: str, token: str | None) -> AsyncIterator[ClientSession]:
    import httpx2

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers) as client, \
            streamable_http_client(url, http_client=client) as (r, w), ClientSession(r, w) as session:
        await session.initialize()
        yield session


@contextmanager
def http_server(db: Path, *extra: str) -> Iterator[str]:
    """``pmem mcp --transport http`` on a free port; its URL once it accepts connections."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([PMEM_BIN, "--db", str(db), *BASE, "mcp", "--transport", "http", "--port", str(port),
                             *extra], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "PMEM_CACHE_DIR": str(db.parent / "cache")})
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "pmem mcp --transport http did not start"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def run(fn: Callable[[], Awaitable[None]]) -> None:
    anyio.run(fn)


def text(result: Any) -> str:
    return "\n".join(c.text for c in result.content)


async def check_tools(session: ClientSession) -> None:
    tools = {t.name: t for t in (await session.list_tools()).tools}
    assert set(tools) == TOOLS
    for t in tools.values():
        assert t.description and len(t.description) > 40, t.name
        props = t.input_schema["properties"]
        assert all(p.get("description") for name, p in props.items() if name not in ("operations",)), t.name
    assert tools["get"].input_schema["required"] == ["key"]
    operations = dict(tools["apply"].input_schema["properties"]["operations"])
    assert (operations.pop("minItems"), operations.pop("description").startswith("the operations")) == (1, True)
    assert operations.pop("title") == "Operations"  # the SDK's title for the argument
    assert operations == operations_by_msgspec()  # the operation structs' schema, nothing else


def operations_by_msgspec() -> dict[str, Any]:
    """What ``msgspec.json.schema`` generates for a list of the operation structs, references resolved."""
    schema = msgspec.json.schema(list[OpStruct])
    defs = schema.pop("$defs")
    del schema["items"]["discriminator"]
    assert len(defs) == len(OPS) and {d["properties"]["op"]["enum"][0] for d in defs.values()} == set(OPS)
    schema["items"]["anyOf"] = [defs[ref["$ref"].rsplit("/", 1)[1]] for ref in schema["items"]["anyOf"]]
    return schema


async def check_capped_write(session: ClientSession) -> None:
    r = await session.call_tool("apply", {"operations": [
        {"op": "accept", "key": "home city", "value": "Porto", "trust": 99, "source": "bank"}]})
    assert not r.is_error, text(r)
    assert text(r) == "#1 accept home_city -> Porto (active); trust capped 99 -> 60; source set to agent-a"
    (receipt,) = r.structured_content["result"]
    assert receipt["trust_capped"] == {"claimed": 99, "applied": 60}
    h = await session.call_tool("history", {"key": "home city"})
    assert h.structured_content["versions"][0]["trust"] == 60
    assert h.structured_content["versions"][0]["sources"] == ["agent-a"]  # the credential's, not "bank"


async def check_outside_namespace(session: ClientSession) -> None:
    for name, args in (("get", {"key": "home city", "namespace": "b"}),
                       ("apply", {"operations": [{"op": "accept", "key": "x", "value": "y"}], "namespace": "b"})):
        r = await session.call_tool(name, args)
        assert r.is_error and "Forbidden: namespace 'b' is outside credential" in text(r), text(r)


def test_stdio_tools_remember_get_cap_namespace_resource_as_of_and_bad_input(keys: Keys) -> None:
    async def main() -> None:
        async with stdio_session(keys.db, keys.writer) as s:
            await check_tools(s)
            await check_capped_write(s)
            await check_outside_namespace(s)
            r = await s.call_tool("remember", {"text": "My 5K PB is now 25:50."})
            assert not r.is_error and text(r) == "#2 accept 5k_pb -> 25:50 (active)", text(r)
            await s.call_tool("remember", {"text": "My 5K PB is now 24:59."})
            now, then = [await s.call_tool("get", {"key": "5K PB", **a}) for a in ({}, {"as_of": 2})]
            assert (text(now), text(then)) == ("5k_pb = 24:59", "5k_pb = 25:50")
            read = await s.call_tool("read", {"question": "what is my 5k pb?", "k": 1})
            assert text(read) == "5k_pb = 24:59" and read.structured_content["items"] == ["5k_pb"]
            dated = await s.call_tool("read", {"question": "what is my 5k pb?", "k": 1, "dated": True})
            assert re.fullmatch(r"\[\d{1,2} [A-Z][a-z]+ \d{4}\] 5k_pb = 24:59", text(dated)), text(dated)
            await s.call_tool("apply", {"operations": [{"op": "contest", "key": "home city", "value": f"Evil {i}",
                                                         "trust": 10} for i in range(30)]})
            flooded = "home_city = Porto (agent-a, trust 60)  [contested: +30 lower-trust claims]"
            assert text(await s.call_tool("get", {"key": "home city"})) == flooded
            assert text(await s.call_tool("read", {"question": "home city", "k": 1})) == flooded
            assert text(await s.call_tool("read", {"question": "home city", "k": 1, "min_trust": 50})) == \
                "home_city = Porto"
            every = await s.call_tool("read", {"question": "home city", "k": 1, "all_alternatives": True})
            assert text(every).count("(agent-a, trust 10)") == 30
            templates = (await s.list_resource_templates()).resource_templates
            assert [t.uri_template for t in templates] == ["pmem://history/{namespace}/{key}"]
            res = await s.read_resource("pmem://history/a/5k_pb")
            assert '"value":"25:50","status":"superseded"' in res.contents[0].text
            for args in ({"key": ""}, {"key": "x", "as_of": -1}, {"key": "x", "disclose": ["everything"]}):
                bad = await s.call_tool("get", args)
                assert bad.is_error and len(text(bad).splitlines()) == 1 and "Traceback" not in text(bad), args
            bad = await s.call_tool("apply", {"operations": [{"op": "accept", "key": "k"}]})
            assert bad.is_error and "value" in text(bad) and len(text(bad).splitlines()) == 1, text(bad)
    run(main)


def test_stdio_read_only_token_cannot_write_and_a_revoked_token_stops_at_the_next_call(keys: Keys) -> None:
    async def main() -> None:
        async with stdio_session(keys.db, keys.reader) as s:
            r = await s.call_tool("remember", {"text": "My 5K PB is now 25:50."})
            assert r.is_error and "read-only" in text(r), text(r)
            assert not (await s.call_tool("get", {"key": "5k pb"})).is_error
        async with stdio_session(keys.db, keys.writer) as s:
            assert not (await s.call_tool("get", {"key": "5k pb"})).is_error
            keys.revoke(keys.writer_id)
            r = await s.call_tool("get", {"key": "5k pb"})
            assert r.is_error and f"Unauthorized: token {keys.writer_id} was revoked" in text(r), text(r)
    run(main)


def test_http_authenticates_every_request_caps_trust_and_stops_a_revoked_token(keys: Keys) -> None:
    with http_server(keys.db) as url:
        assert httpx.post(url, json={}).status_code == 401
        junk = httpx.post(url, json={}, headers={"Authorization": "Bearer pmem_junk"})
        assert junk.status_code == 401 and junk.json()["error"]["message"].startswith("Unauthorized: missing")

        async def main() -> None:
            async with http_session(url, keys.writer) as s:
                await check_tools(s)
                await check_capped_write(s)
                await check_outside_namespace(s)
                keys.revoke(keys.writer_id)
                with pytest.raises(MCPError, match=f"Unauthorized: token {keys.writer_id} was revoked"):
                    await s.call_tool("get", {"key": "home city"})
            async with http_session(url, keys.reader) as s:
                r = await s.call_tool("apply", {"operations": [{"op": "accept", "key": "x", "value": "y"}]})
                assert r.is_error and "read-only" in text(r)
                assert text(await s.call_tool("get", {"key": "home city"})) == "home_city = Porto"
        run(main)
        headers = {"Authorization": f"Bearer {keys.writer}"}
        assert httpx.post(url, json={}, headers=headers).status_code == 401


# Slow: starts a server process for each refusal.
@pytest.mark.slow
def test_the_server_refuses_to_start_without_a_credential_rule(tmp_path: Path, keys: Keys) -> None:
    def start(db: Path, *args: str, token: str | None = None) -> subprocess.CompletedProcess[bytes]:
        env = {k: v for k, v in os.environ.items() if k != "PMEM_TOKEN"} | ({"PMEM_TOKEN": token} if token else {})
        return subprocess.run([PMEM_BIN, "--db", str(db), "mcp", *args], capture_output=True, env=env,
                              stdin=subprocess.DEVNULL, timeout=60)

    empty = tmp_path / "empty.db"
    cases = [(start(empty), "no active credential"),
             (start(keys.db), "a token is required"),
             (start(keys.db, "--insecure-local"), "only for a store without any"),
             (start(empty, "--transport", "http", "--insecure-local", "--host", "0.0.0.0"), "127.0.0.1 only"),
             (start(keys.db, "--transport", "http", "--token", keys.writer), "--token is for stdio")]
    for r, message in cases:
        assert r.returncode == 2 and message in r.stderr.decode(), r.stderr
    bad = start(keys.db, token="pmem_0123456789ab_nope")
    assert bad.returncode == 1 and b"unknown token" in bad.stderr
