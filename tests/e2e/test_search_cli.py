"""``pmem search`` as a user runs it (SPEC §9): JSON lines of cells with ``score``; bad input is one
JSON error on stderr."""

from __future__ import annotations

import subprocess
import sys

from pmem.adapters.storage.backend import open_backend
from tests.e2e.test_cli import error, ok, pmem

CELL_FIELDS = {"key", "value", "status", "alternatives", "namespace", "score", "matched"}


def seed(db: str) -> None:
    ok(db, "accept", "5K PB", "27:12")  # 1
    ok(db, "accept", "5K PB", "25:50")  # 2
    ok(db, "accept", "home city", "Paris")  # 3
    ok(db, "contest", "home city", "Lyon")  # 4
    ok(db, "accept", "budget", "$30k")  # 5


def test_search_prints_json_lines_of_cells_with_a_score_best_first(db: str) -> None:
    seed(db)
    rows = ok(db, "search", "5k pb")
    assert len(rows) == 3 and all(set(r) == CELL_FIELDS for r in rows)
    assert rows[0] == {"key": "5k_pb", "value": "25:50", "status": "active", "alternatives": [],
                       "namespace": "default", "score": rows[0]["score"], "matched": "25:50"}
    assert [r["score"] for r in rows] == sorted((r["score"] for r in rows), reverse=True)
    (city,) = ok(db, "search", "home city lyon", "-k", "1")
    assert (city["value"], city["status"], city["alternatives"], city["matched"]) == (
        "Paris", "contested", ["Lyon"], "Lyon")


def test_search_as_of_reads_the_cells_as_they_were(db: str) -> None:
    seed(db)
    (then,) = ok(db, "search", "5k pb 27:12", "-k", "1", "--as-of", "1")
    assert (then["value"], then["matched"]) == ("27:12", "27:12")
    assert ok(db, "search", "anything", "--as-of", "0") == []
    assert ok(db, "--namespace", "other", "search", "5k pb") == []


def test_search_rebuilds_its_deleted_cache_file(db: str) -> None:
    seed(db)
    before = ok(db, "search", "budget")
    cache = open_backend(db).cache_path("vec-flat")  # next to the file, or under PMEM_CACHE_DIR
    assert cache.exists()
    cache.unlink()
    assert ok(db, "search", "budget") == before and cache.exists()


def test_a_bad_k_or_query_is_a_json_error(db: str) -> None:
    seed(db)
    for args in (["-k", "0"], ["-k", "-2"], ["-k", "many"], ["--as-of", "-1"]):
        err = error(pmem(db, "search", "budget", *args))
        assert err["error"] == "usage", err
    err = error(pmem(db, "search", "   "))
    assert err["error"] == "invalid operation" and "query" in err["detail"]
    err = error(pmem(db, "search"))
    assert err["error"] == "usage"


def test_reads_other_than_search_do_not_load_faiss_or_numpy() -> None:
    code = ("import sys, pmem.adapters.entrypoints.cli, pmem.adapters.service.store; "
            "sys.exit(bool({'faiss', 'numpy'} & set(sys.modules)))")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_search_can_embed_through_an_openai_compatible_server_and_a_bad_embedder_is_a_usage_error(
        db: str) -> None:
    from tests.embedding_server import embedding_server

    seed(db)
    with embedding_server(32) as server:
        rows = ok(db, "search", "budget", "-k", "1", "--embedder", "litellm:test-embed",
                  "--embedder-base", server.base)
        assert rows[0]["key"] == "budget" and server.requests  # the server did the embedding
    bad = error(pmem(db, "search", "budget", "--embedder", "word2vec"))
    assert bad == {"error": "invalid operation",
                   "detail": "unknown embedder 'word2vec' (expected onnx, onnx-fp32, hashing or litellm:MODEL)"}
    (hashed,) = ok(db, "search", "budget", "-k", "1", "--embedder", "hashing")
    assert hashed["key"] == "budget"
