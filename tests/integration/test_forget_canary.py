"""The canary test of forgetting (docs/forgetting.md), on both backends.

Distinct canary strings go into a value, an evidence text and a source; searches, reads and the
graph (with embeddings) make every index and cache hold them: the frontier, graph and lexical
projections, the vector tables, the FAISS cache file, the embedding cache (the real ONNX embedder).
Then the cell is forgotten and the store closed, and every byte of every file the store and its
caches use is scanned for each canary, as written and lowercased (FTS5 keeps lowercased tokens):
0 hits. The same run without the forget finds them, so the scan can fail.

SQLite: the store file, its -wal and -shm, the FAISS cache file next to it, anything else in the
folder. PostgreSQL: the relation files (every fork and segment) of the schema's tables, their
indexes and TOAST tables, after ``VACUUM FULL`` and ``CHECKPOINT``, and the ``$PMEM_CACHE_DIR``
folder. WAL segments and backups are out of scope (documented). Each PostgreSQL case has a database of
its own: ``VACUUM FULL`` keeps a deleted row while any transaction in the same database may still see
it, and other tests run transactions beside this one.
"""

from __future__ import annotations

import re
import secrets
from pathlib import Path

import pytest

import pmem
from tests.conftest import Backend


def canaries() -> dict[str, str]:
    tag = secrets.token_hex(6)
    return {"value": f"CANARYv{tag}", "text": f"CANARYe{tag}", "source": f"CANARYs{tag}"}


def fill(url: str, c: dict[str, str], *, forget: bool) -> None:
    """Write the canaries, make every index and cache hold them, then (maybe) forget; close."""
    with pmem.open(url) as store:
        store.accept("alice.secret", c["value"], text=f"she said {c['text']}", source=c["source"])
        store.support("alice.secret", text=f"again {c['text']}", source=c["source"])
        store.accept("alice.city", "Lisbon", source=c["source"])
        store.accept("bob.city", "Porto", text="bob said so")
        hits = store.search(c["value"], 3)
        assert hits[0].cell.value == c["value"]  # found: the vector and lexical indexes hold it
        assert store.search(c["text"], 3)
        store.read(f"what is alice's secret {c['value']}")
        graph = store.graph(embed=True)  # the embedding cache holds the entity texts
        assert any(e.text == c["value"] for e in graph.entities.values())
        assert c["value"] in str(store.log())
        if forget:
            receipts = store.forget(subject="alice")
            assert [r.key for r in receipts] == ["alice.city", "alice.secret"]
            assert store.get("alice.secret").status == "empty"
            assert store.get("bob.city").value == "Porto"  # the other cells are untouched
            assert store.search(c["value"], 3)[0].cell.key == "bob.city"


@pytest.fixture
def store_url(backend: Backend) -> str:
    """A new store; on PostgreSQL, in a database of its own (see the module's docstring)."""
    return backend.new_database_url()


def hits(files: list[Path], c: dict[str, str]) -> list[tuple[str, str]]:
    found = []
    for f in files:
        data = f.read_bytes()
        for canary in c.values():
            for form in {canary, canary.lower()}:
                if form.encode() in data:
                    found.append((f.name, form))
    return found


def store_files(backend: Backend, url: str, tmp_path: Path) -> list[Path]:
    """Every file the store and its caches use (PostgreSQL: its relation files, after VACUUM FULL)."""
    files = [p for p in tmp_path.rglob("*") if p.is_file()]  # SQLite: all of it; PostgreSQL: the cache dir
    if backend.name == "postgres":
        files += pg_relation_files(url)
    return files


def pg_relation_files(url: str) -> list[Path]:
    import psycopg

    from pmem.adapters.storage.backend import PgBackend

    pg = PgBackend.from_url(url)
    with psycopg.connect(**pg.conninfo, autocommit=True) as conn:
        data = Path(conn.execute("SHOW data_directory").fetchone()[0])  # type: ignore[index]
        if not data.exists() or not (data / "base").exists():
            pytest.skip(f"the PostgreSQL data directory {data} is not readable here: its files cannot be scanned")
        tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s",
                                             (pg.schema,)).fetchall()]
        for table in tables:
            conn.execute(f'VACUUM FULL "{pg.schema}"."{table}"')
        conn.execute("CHECKPOINT")
        rels = conn.execute(
            "WITH t AS (SELECT c.oid, c.reltoastrelid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s) "
            "SELECT pg_relation_filepath(oid) FROM t UNION SELECT pg_relation_filepath(reltoastrelid) FROM t "
            "WHERE reltoastrelid <> 0 UNION SELECT pg_relation_filepath(i.indexrelid) FROM t JOIN pg_index i "
            "ON i.indrelid = t.reltoastrelid", (pg.schema,)).fetchall()
    paths: list[Path] = []
    for (rel,) in rels:
        if rel:  # the main fork and its segments (N, N.1, ...) and the other forks (N_fsm, N_vm, N_init)
            base = data / rel
            paths += [p for p in base.parent.iterdir()
                      if p.is_file() and re.fullmatch(re.escape(base.name) + r"(\.\d+|_[a-z]+)?", p.name)]
    assert paths, "no relation files found"
    return paths


@pytest.mark.parametrize("forget", [False, True], ids=["kept", "forgotten"])
def test_no_byte_of_a_forgotten_cell_is_left_in_any_file(backend: Backend, store_url: str, tmp_path: Path,
                                                          forget: bool) -> None:
    c = canaries()
    url = store_url
    fill(url, c, forget=forget)
    found = hits(store_files(backend, url, tmp_path), c)
    if forget:
        assert found == []
    else:  # the scan can fail: without the forget, the canaries are there
        assert {form for _, form in found} >= {c["value"], c["text"].lower(), c["source"]}


def test_a_rebuild_after_a_forget_brings_no_plaintext_back(backend: Backend, store_url: str, tmp_path: Path) -> None:
    c = canaries()
    url = store_url
    fill(url, c, forget=True)
    with pmem.open(url) as store:
        store.rebuild()
        assert store.history("alice.secret").versions[0].value == "<forgotten>"
        assert store.search(c["value"], 3)[0].cell.key == "bob.city"
        store.graph(embed=True)
    assert hits(store_files(backend, url, tmp_path), c) == []
