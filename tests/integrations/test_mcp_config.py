"""The client configuration of docs/mcp.md works when pasted: each JSON block is read out of the page, its
placeholders (paths, token, port) replaced, and the official MCP SDK's client starts or reaches
``pmem mcp`` from it exactly as a client would, then calls every tool the server lists."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import PMEM_BIN
from tests.e2e.test_mcp import http_server

DOC = Path(__file__).resolve().parents[2] / "docs" / "mcp.md"
TOKEN = "pmem_0123456789ab_..."
# The only additions to the pasted JSON: the fast hashing embedder and a private cache, as in every MCP test.
TEST_ENV = {"PMEM_EMBEDDER": "hashing"}


def config(kind: str) -> dict[str, Any]:
    """The ``pmem`` entry of the JSON block under ``<!-- mcp-config: KIND ... -->`` in docs/mcp.md."""
    m = re.search(rf"<!-- mcp-config: {kind}\b.*?-->\n```json\n(.*?)\n```", DOC.read_text(), re.S)
    assert m, f"docs/mcp.md has no {kind} configuration block"
    entry: dict[str, Any] = json.loads(m[1])["mcpServers"]["pmem"]
    return entry


def new_token(db: Path) -> str:
    """A token made the way the page says: ``pmem --db DB keys add ...``."""
    out = subprocess.run([PMEM_BIN, "--db", str(db), "keys", "add", "--namespace", "default", "--source", "claude",
                          "--max-trust", "70"], capture_output=True, text=True, check=True)
    token: str = json.loads(out.stdout)["token"]
    return token


def pasted(value: Any, db: Path, token: str) -> Any:
    """``value`` with the page's placeholders filled in, as a user would."""
    text = json.dumps(value).replace("/path/to/.venv/bin/pmem", PMEM_BIN).replace("/path/to/mem.db", str(db))
    return json.loads(text.replace(TOKEN, token))


async def every_tool(session: ClientSession) -> None:
    await session.initialize()
    listed = {t.name for t in (await session.list_tools()).tools}
    calls = {"remember": {"text": "My 5K PB is now 25:50."},
             "apply": {"operations": [{"op": "accept", "key": "home city", "value": "Lisbon", "trust": 99}]},
             "get": {"key": "5K PB"}, "history": {"key": "5K PB"}, "search": {"query": "5k pb"},
             "read": {"question": "What is my 5K PB?"}, "what_next": {}}
    assert listed == set(calls), "a tool was added or removed: call it here too"
    seen = {}
    for name, args in calls.items():
        result = await session.call_tool(name, args)
        seen[name] = "\n".join(c.text for c in result.content if c.type == "text")
        assert not result.is_error, (name, seen[name])
    assert "accept 5k_pb -> 25:50" in seen["remember"]
    assert seen["apply"] == "#2 accept home_city -> Lisbon (active); trust capped 99 -> 70"  # the token's cap
    assert seen["get"] == "5k_pb = 25:50" and "25:50" in seen["history"] and "5k_pb" in seen["search"]
    assert "25:50" in seen["read"]


def test_the_stdio_block_starts_pmem_mcp_with_its_token(tmp_path: Path) -> None:
    db = tmp_path / "mem.db"
    entry = pasted(config("stdio"), db, new_token(db))
    assert set(entry) == {"command", "args", "env"} and set(entry["env"]) == {"PMEM_TOKEN"}

    async def go() -> None:
        params = StdioServerParameters(command=entry["command"], args=entry["args"],
                                       env={**entry["env"], **TEST_ENV, "PMEM_CACHE_DIR": str(tmp_path / "cache")})
        with open(tmp_path / "stderr.log", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (r, w), ClientSession(r, w) as session:
                await every_tool(session)

    anyio.run(go)


@asynccontextmanager
async def http_session(entry: dict[str, Any]) -> AsyncIterator[ClientSession]:
    import httpx2

    async with httpx2.AsyncClient(headers=entry["headers"]) as client, \
            streamable_http_client(entry["url"], http_client=client) as (r, w), ClientSession(r, w) as session:
        yield session


def test_the_http_block_reaches_a_running_server_with_its_header(tmp_path: Path) -> None:
    db = tmp_path / "mem.db"
    token = new_token(db)
    with http_server(db) as url:
        entry = pasted(config("http"), db, token)
        assert set(entry) == {"url", "headers"} and entry["url"] == "http://127.0.0.1:8766/mcp"
        entry["url"] = url  # the test's server listens on a free port, not 8766

        async def go() -> None:
            async with http_session(entry) as session:
                await every_tool(session)

        anyio.run(go)
