"""Multi-hop reading as users run it (docs/reading.md#multi-hop-reading): ``pmem read --hops`` and
``--iterative`` through the CLI (the docs example, run line by line in a shell), the Python API, the HTTP
``/v1/read`` route and the MCP ``read`` tool, with the paths taken, ``as_of`` and bad input."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

import pmem
from tests.conftest import PMEM_BIN, ROOT
from tests.e2e.test_cli import error, ok
from tests.e2e.test_cli import pmem as run_pmem

FACTS = [
    "The author of Our Mutual Friend is Charles Dickens.",
    "Charles Dickens is married to Catherine Hogarth.",
    "Catherine Hogarth is a citizen of England.",
    "Ellen Ternan is a citizen of Belgium.",
    "Charles Dickens is married to Ellen Ternan.",  # event 5: the spouse link is updated
    "Great Expectations is a citizen of Country Of The Spouse.",  # a decoy near the question's words
]
Q = "What is the country of citizenship of the spouse of the author of Our Mutual Friend?"
NOW = "our mutual friend -> author -> Charles Dickens -> spouse -> Ellen Ternan -> citizenship -> Belgium"
THEN = "our mutual friend -> author -> Charles Dickens -> spouse -> Catherine Hogarth -> citizenship -> England"


def seeded(db: Path) -> Path:
    ok(db, "ingest", "-", "-q", stdin="\n".join(FACTS).encode())
    return db


def test_the_docs_multihop_example_prints_the_paths_it_shows(tmp_path: Path) -> None:
    doc = (ROOT / "docs" / "reading.md").read_text()
    block = re.compile(r"```console\n(.*?)```", re.S).search(doc, doc.index("## Multi-hop reading"))
    assert block is not None
    env = {**os.environ, "PMEM_DB": str(tmp_path / "mem.db"), "PATH": f"{Path(PMEM_BIN).parent}:{os.environ['PATH']}"}
    lines = block.group(1).splitlines()
    shown_paths = 0
    for i, line in enumerate(lines):
        if not line.startswith("$ "):
            continue
        r = subprocess.run(["bash", "-c", "set -o pipefail; " + line[2:]], env=env, capture_output=True, text=True)
        assert r.returncode == 0, (line, r.stderr)
        shown = lines[i + 1] if i + 1 < len(lines) and not lines[i + 1].startswith("$ ") else None
        if shown is None:
            continue
        got = json.loads(r.stdout)
        for field, value in re.findall(r'"(\w+)":("(?:[^"\\]|\\.)*"|\[[^\]]*\]|true|false|\d+)', shown):
            assert got[field] == json.loads(value), (field, got)
            shown_paths += field == "paths"
    assert shown_paths == 2


def test_cli_hops_reads_the_chain_now_and_as_of_before_the_update(db_path: Path) -> None:
    seeded(db_path)
    (r,) = ok(db_path, "read", Q, "-k", "1", "--hops", "3")
    assert r["paths"][0] == NOW and "ellen_ternan.citizenship = Belgium" in r["context"]
    assert r["items"][:3] == ["our_mutual_friend.author", "charles_dickens.spouse", "ellen_ternan.citizenship"]
    (then,) = ok(db_path, "read", Q, "-k", "1", "--hops", "3", "--as-of", "4")
    assert then["paths"][0] == THEN and "Ellen Ternan" not in then["context"]
    (plain,) = ok(db_path, "read", Q, "-k", "1")
    assert "paths" not in plain and "Belgium" not in plain["context"]  # single-shot misses the third hop


def test_cli_hops_keeps_the_reading_policy(db_path: Path) -> None:
    seeded(db_path)
    (r,) = ok(db_path, "read", Q, "-k", "1", "--hops", "3", "--budget", "12")
    assert r["tokens"] <= 12 and r["items"] == ["our_mutual_friend.author"]  # best path first, cut whole
    (r,) = ok(db_path, "read", Q, "-k", "1", "--hops", "3", "--min-trust", "60")
    assert r["context"] == "" and r["paths"] == [NOW]  # every fact is trust 50: nothing is readable at 60


def test_bad_multihop_input_is_one_json_error(db_path: Path) -> None:
    assert "--hops must be a number of hops" in error(run_pmem(db_path, "read", "q", "--hops", "-1"))["detail"]
    assert "from 0 to 6, got 7" in error(run_pmem(db_path, "read", "q", "--hops", "7"))["detail"]
    r = run_pmem(db_path, "read", "q", "--hops", "2", "--mode", "turns")
    assert r.returncode == 2 and "do not combine with mode turns" in error(r)["detail"]
    env = {k: v for k, v in os.environ.items() if k != "PMEM_LLM_BASE"}
    r = run_pmem(db_path, "read", "q", "--iterative", env=env)
    assert error(r)["error"] == "reader not configured"


def test_python_api_hops_and_its_validation(tmp_path: Path) -> None:
    db = seeded(tmp_path / "mem.db")
    with pmem.open(db) as store:
        r = store.read(Q, k=1, hops=3)
        assert r.paths is not None and r.paths[0] == NOW
        assert store.read(Q, k=1, hops=3, as_of=4).paths == (THEN,)
        for bad in ({"hops": True}, {"hops": "3"}, {"iterative": 1}):
            with pytest.raises(pmem.InvalidOperation):
                store.read(Q, **bad)  # type: ignore[arg-type]


class ScriptedModel(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat server answering from a script, so ``--iterative`` runs the real
    litellm call over real HTTP with no model."""

    replies: list[str] = []
    prompts: list[str] = []

    def do_POST(self) -> None:  # noqa: N802 (the http.server name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.prompts.append(body["messages"][-1]["content"])
        text = self.replies[min(len(self.prompts) - 1, len(self.replies) - 1)]
        out = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                          "choices": [{"index": 0, "finish_reason": "stop",
                                       "message": {"role": "assistant", "content": text}}],
                          "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def model() -> Iterator[str]:
    ScriptedModel.replies, ScriptedModel.prompts = ["Ellen Ternan citizenship", "DONE"], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), ScriptedModel)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()


def test_cli_iterative_reports_each_lookup_and_the_cells_it_added(db_path: Path, model: str) -> None:
    seeded(db_path)
    env = {**os.environ, "PMEM_LLM_BASE": model, "PMEM_LLM_MODEL": "qwen"}
    r = run_pmem(db_path, "read", Q, "-k", "1", "--iterative", env=env)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["lookups"] == ["Ellen Ternan citizenship"] and len(ScriptedModel.prompts) == 2
    assert out["paths"][0].startswith("lookup 'Ellen Ternan citizenship' -> ") and "ellen_ternan.citizenship" in \
        out["paths"][0]
    assert "Belgium" in out["context"]


def test_http_read_takes_hops_and_answers_the_paths(tmp_path: Path) -> None:
    from tests.server.http_servers import serving

    db = seeded(tmp_path / "mem.db")
    with serving(str(db), "--insecure-local") as url, httpx.Client(base_url=url, timeout=60) as c:
        r = c.post("/v1/read", json={"question": Q, "k": 1, "hops": 3, "as_of": 4})
        assert r.status_code == 200, r.text
        assert r.json()["paths"] == [THEN]
        bad = c.post("/v1/read", json={"question": Q, "hops": 9})
        assert bad.status_code == 400 and "hops" in bad.text


def test_mcp_read_takes_hops_and_shows_the_path(tmp_path: Path) -> None:
    from tests.e2e.test_mcp import Keys, stdio_session, text

    keys = Keys(tmp_path / "mem.db")
    ok(keys.db, "--namespace", "a", "ingest", "-", "-q", stdin="\n".join(FACTS).encode())

    async def main() -> None:
        async with stdio_session(keys.db, keys.reader) as s:
            r = await s.call_tool("read", {"question": Q, "k": 1, "hops": 3})
            assert not r.is_error, text(r)
            assert text(r).endswith(f"\npath: {NOW}") and r.structured_content["paths"] == [NOW]

    anyio.run(main)


def test_a_forgotten_link_is_not_read_from_a_kept_graph(tmp_path: Path) -> None:
    db = seeded(tmp_path / "mem.db")
    with pmem.open(db) as store:
        before = store.read(Q, k=1, hops=3, as_of=6)  # the graph as of 6 is now kept
        assert before.paths is not None and before.paths[0] == NOW
        store.forget("ellen_ternan.citizenship")
        after = store.read(Q, k=1, hops=3, as_of=6)
        assert after.paths is not None and "Belgium" not in after.context + "".join(after.paths)


def test_a_path_that_ends_at_a_named_entity_reads_that_entitys_facts(tmp_path: Path) -> None:
    # The question names one relation; what it asks of the religion is in words no slot catches, so
    # the path is finished at "Christianity", and the read goes on to the cells of christianity itself.
    facts = ["Bagratuni Dynasty is affiliated with the religion of Christianity.",
             "Christianity was founded in the city of Jerusalem.",
             "Christianity was founded by Jesus Christ.",
             *(f"{s} is affiliated with the religion of {r}." for s, r in
               [("Kingdom of Iberia", "Zoroastrianism"), ("Sasanian Empire", "Zoroastrianism"),
                ("Tang Empire", "Buddhism"), ("Ellen Ternan", "Anglicanism")]),
             "Zoroastrianism was founded in the city of Balkh."]
    db = tmp_path / "mem.db"
    ok(db, "ingest", "-", "-q", stdin="\n".join(facts).encode())
    q = "Where did the religion associated with the Bagratuni Dynasty come into existence?"
    with pmem.open(db) as store:
        assert "Jerusalem" not in store.read(q, k=1).context
        r = store.read(q, k=1, hops=3)
        assert r.paths is not None and r.paths[0] == "bagratuni dynasty -> religion -> Christianity"
        assert "christianity.founded_in_city = Jerusalem" in r.context.splitlines()
        assert "Balkh" not in r.context  # another religion's cells are not read
