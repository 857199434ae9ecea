"""Search-ready after ingest: ``pmem ingest`` brings the vector, lexical and frontier projections up
before it returns (:mod:`pmem.adapters.service.eager_index`; ``pmem apply`` leaves them to the first search), so the
first search embeds nothing but its query, and finds exactly what the lazy path (``PMEM_EAGER_INDEX=0``) finds."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

import pmem
from pmem.adapters.embedders.onnx_embedder import OnnxEmbedder
from pmem.adapters.readmodels.tracked_projection import tracked_position
from pmem.adapters.service.eager_index import EAGER_MIN, EagerIndex
from pmem.adapters.service.ingest import Ingestor
from pmem.adapters.sources.records import read_records
from pmem.domain.extraction.cloze import TEMPLATES
from pmem.domain.extraction.template import TemplateExtractor

REPO = Path(__file__).resolve().parents[2]
PMEM = str(Path(sys.executable).parent / "pmem")
FACTS = EAGER_MIN + 140  # over the threshold, and more than one committed batch after it
QUERIES = ("The capital of Subject 3", "Object 17", "who developed Subject 12")


def stream(facts: int = FACTS, slots: int = 200, seed: int = 7) -> str:
    """A FactConsolidation-style stream: numbered cloze facts, later lines overriding earlier slots."""
    rng = random.Random(seed)
    pids = sorted(TEMPLATES)
    slot_list = [(f"Subject {i}", rng.choice(pids)) for i in range(slots)]
    lines = ["Here is a list of facts:"]
    for i in range(facts):
        subject, pid = rng.choice(slot_list)
        lines.append(f"{i}. {TEMPLATES[pid][0].replace('[X]', subject).replace('__', f'Object {rng.randrange(50)}')}.")
    return "\n".join(lines) + "\n"


def pmem_cli(*args: str, eager: bool = True, stdin: str | None = None) -> str:
    env = dict(os.environ, PYTHONPATH=str(REPO), PMEM_EAGER_INDEX="1" if eager else "0")
    r = subprocess.run([PMEM, *args], capture_output=True, text=True, env=env, input=stdin, cwd=REPO)
    assert r.returncode == 0, r.stderr
    return r.stdout


def positions(db: str) -> tuple[int, int, int, int]:
    """(last event index, vector, lexical and frontier positions), read without catching anything up."""
    with pmem.open(db) as store:
        conn = store.projection_db
        return (store.last_index(), tracked_position(conn, "vectors"), tracked_position(conn, "lexical"),
                tracked_position(conn, "frontier"))


def first_search(db: str) -> tuple[list[list[tuple[str, float]]], int]:
    """The hits of :data:`QUERIES` through a fresh store with the real ONNX embedder, and how many texts
    that embedder ran through the model (the queries alone when the index was ready)."""
    model = OnnxEmbedder()
    with pmem.open(db, embedder=model) as store:
        hits = [[(r.cell.key, round(r.score, 6)) for r in store.search(q, k=5)] for q in QUERIES]
    return hits, model.texts


def test_ingest_leaves_search_ready_and_finds_what_the_lazy_path_finds(tmp_path: Path) -> None:
    (tmp_path / "s.txt").write_text(stream())
    eager, lazy = str(tmp_path / "eager.db"), str(tmp_path / "lazy.db")
    pmem_cli("ingest", str(tmp_path / "s.txt"), "--db", eager)
    pmem_cli("ingest", str(tmp_path / "s.txt"), "--db", lazy, eager=False)
    last, vectors, lexical, frontier = positions(eager)
    assert last >= FACTS and vectors == last and lexical == last and frontier == last
    assert positions(lazy)[1:3] == (0, 0)  # today's behaviour kept behind the switch
    assert Path(eager + ".vec-flat").exists() and not Path(lazy + ".vec-flat").exists()
    eager_hits, eager_texts = first_search(eager)
    lazy_hits, lazy_texts = first_search(lazy)
    assert eager_texts == len(QUERIES)  # the index was ready: only the queries were embedded
    assert lazy_texts > len(QUERIES)
    assert eager_hits == lazy_hits and all(eager_hits)


@pytest.mark.usefixtures("backend")
def test_apply_leaves_the_search_projections_to_the_first_search_however_large(db: str) -> None:
    """With the hashing embedder, on both backends: neither a one-line apply nor a batch of EAGER_MIN
    lines indexes (docs/decisions.md: only ingest does); the first search then catches both up."""
    pmem_cli("--db", db, "--embedder", "hashing", "apply", "-",
             stdin='{"op": "accept", "key": "solo.one", "value": "x"}\n')
    assert positions(db)[:3] == (1, 0, 0)
    lines = "".join(json.dumps({"op": "accept", "key": f"user.k{i}", "value": f"v{i}"}) + "\n"
                    for i in range(EAGER_MIN))
    pmem_cli("--db", db, "--embedder", "hashing", "apply", "-", stdin=lines)
    assert positions(db)[:3] == (EAGER_MIN + 1, 0, 0)
    with pmem.open(db, embedder="hashing") as store:
        assert store.search("k7 v7", k=1)[0].cell.key == "user.k7"
    assert positions(db) == (EAGER_MIN + 1,) * 4


def test_ingest_without_a_loadable_embedder_still_writes(tmp_path: Path) -> None:
    """The model file missing: the ingest writes every fact, the lexical projection follows, and
    search (not the write) reports the embedder's problem."""
    missing = OnnxEmbedder(model_path=tmp_path / "missing.onnx")
    db = str(tmp_path / "m.db")
    with pmem.open(db, embedder=missing) as store:
        receipts = list(Ingestor(store, TemplateExtractor(), index=EagerIndex(store)).run(
            read_records(stream().encode(), "lines")))
    assert sum(1 for r in receipts if r["event_index"] is not None) == FACTS
    last, _, lexical, frontier = positions(db)
    assert lexical == frontier == last == FACTS
    with pmem.open(db, embedder=missing) as store, pytest.raises(pmem.PmemError, match="not found"):
        store.search("Subject 3")


def test_a_running_worker_takes_the_vector_work(tmp_path: Path) -> None:
    """A live ``pmem worker --projection vectors``: the writer leaves the vectors to it (its own
    embedder never runs) and keeps the lexical projection itself."""
    db = str(tmp_path / "w.db")
    pmem.open(db).close()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    worker = subprocess.Popen([PMEM, "--db", db, "--embedder", "hashing", "worker", "--projection", "vectors"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    try:
        deadline = time.monotonic() + 60
        while "worker" not in pmem_stats(db).get("vectors", {}):
            assert worker.poll() is None and time.monotonic() < deadline, worker.stderr and worker.stderr.read()
            time.sleep(0.1)
        model = OnnxEmbedder()
        with pmem.open(db, embedder=model) as store:
            index = EagerIndex(store)
            list(Ingestor(store, TemplateExtractor(), index=index).run(read_records(stream().encode(), "lines")))
        assert model.texts == 0
        last, _, lexical, frontier = positions(db)
        assert lexical == frontier == last
        while positions(db)[1] != last:  # the worker catches the vectors up
            assert worker.poll() is None and time.monotonic() < deadline + 60
            time.sleep(0.1)
    finally:
        worker.terminate()
        worker.wait(timeout=60)


def pmem_stats(db: str) -> dict[str, dict[str, object]]:
    with pmem.open(db) as store:
        projections: dict[str, dict[str, object]] = store.stats()["projections"]
    return projections
