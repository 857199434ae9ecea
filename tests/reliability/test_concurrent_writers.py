"""Eight processes write to the same five keys of one store at once, one operation per call.

Nothing may be lost or doubled (every op_id lands exactly once), and the result must be what one writer
would have produced from the same log: a fresh store fed the same operations in event-index order decides
every one the same way (this isolates concurrency faults); the projection read equals the fold of the log
(projections/replay.py); and both the reference model of ../shared/tools and tests/reference_model.py,
fed the same operations, agree with every decision and the final state (this also checks the domain
rules of SPEC §3 on four thousand interleaved operations).
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

import pmem
from tests.reference_model import RefCell
from tests.reliability.conftest import REPO, WORKERS, child_env, integrity_check, new_store_url

REFMODEL_DIR = REPO.parent / "shared" / "tools"
PROCESSES = 8
OPS_PER_PROCESS = 500
PAUSE_S = 0.003  # each writer pauses up to this long between calls, so that the write lock changes hands
MIN_WRITER_SWITCHES = 100  # typically over a thousand; far fewer means the test barely exercised concurrency
WORKER_TIMEOUT_S = 600


@pytest.fixture(scope="module")
def refmodel() -> Any:
    if not (REFMODEL_DIR / "refmodel.py").is_file():
        pytest.skip(f"optional extra check: the shared reference model {REFMODEL_DIR / 'refmodel.py'} is not present "
                    "(it lives in ../shared/tools, outside this repository); tests/reference_model.py is checked above")
    sys.path.insert(0, str(REFMODEL_DIR))
    try:
        import refmodel
    finally:
        sys.path.remove(str(REFMODEL_DIR))
    return refmodel


@pytest.fixture(scope="module")
def hammered(backend: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Run the eight writers once; the tests below each check one property of the result."""
    tmp = tmp_path_factory.mktemp(f"concurrency-{backend}")
    db = new_store_url(backend, tmp)
    procs: list[subprocess.Popen[str]] = []
    outs = [tmp / f"worker-{p}.jsonl" for p in range(PROCESSES)]
    errs = [open(tmp / f"worker-{p}.err", "w") for p in range(PROCESSES)]  # noqa: SIM115
    try:
        for p in range(PROCESSES):
            procs.append(subprocess.Popen(
                [sys.executable, str(WORKERS), "hammer", db, str(p), str(OPS_PER_PROCESS),
                 str(1000 + p), str(outs[p]), str(PAUSE_S)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errs[p], text=True,
                cwd=REPO, env=child_env()))
        for p, proc in enumerate(procs):  # every worker has opened the store (all at once) ...
            assert proc.stdout is not None and proc.stdout.readline() == "ready\n", \
                (tmp / f"worker-{p}.err").read_text()
        for proc in procs:  # ... then they all start writing together
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.close()
        for p, proc in enumerate(procs):
            rc = proc.wait(timeout=WORKER_TIMEOUT_S)
            assert rc == 0, f"worker {p} exited {rc}:\n{(tmp / f'worker-{p}.err').read_text()}"
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for f in errs:
            f.close()
    records = [json.loads(line) for out in outs for line in out.read_text().splitlines()]
    with pmem.open(db) as store, pmem.open(db, reader="replay") as replay:
        disclose = ("history", "alternatives", "support")
        return {"records": records, "log": store.log(), "last_index": store.last_index(),
                "frontier": store.frontier(), "integrity": integrity_check(store),
                "projected": store.frontier(disclose=disclose), "folded": replay.frontier(disclose=disclose)}


def test_every_concurrent_operation_is_recorded_exactly_once(hammered: dict[str, Any]) -> None:
    log = hammered["log"]
    expected = {f"p{p}-{i}" for p in range(PROCESSES) for i in range(OPS_PER_PROCESS)}
    op_ids = [e.get("op_id") for e in log]
    assert len(log) == PROCESSES * OPS_PER_PROCESS
    assert hammered["last_index"] == PROCESSES * OPS_PER_PROCESS
    assert len(set(op_ids)) == len(op_ids), "an op_id was recorded twice"
    assert set(op_ids) == expected, f"missing: {sorted(expected - set(op_ids))[:10]}"
    assert [e["event_index"] for e in log] == list(range(1, len(log) + 1))
    assert hammered["integrity"] == "ok"


def test_the_writers_really_interleave_in_the_log(hammered: dict[str, Any]) -> None:
    writers = [e["op_id"].split("-")[0] for e in hammered["log"]]
    switches = sum(a != b for a, b in zip(writers, writers[1:], strict=False))
    assert switches >= MIN_WRITER_SWITCHES, f"only {switches} changes of writer in the log"


def test_every_receipt_names_the_event_its_operation_became(hammered: dict[str, Any]) -> None:
    by_index = {e["event_index"]: e for e in hammered["log"]}
    assert len(hammered["records"]) == PROCESSES * OPS_PER_PROCESS
    for rec in hammered["records"]:
        sent, r = rec["sent"], rec["receipt"]
        assert not r["duplicate"] and r["op_id"] == sent["op_id"]
        event = by_index.get(r["event_index"])
        assert event is not None, f"receipt {r} points at no event"
        assert event["op_id"] == sent["op_id"], f"receipt {r} points at {event}"
        assert (event["op"], event["applied"], event["requested"]) == (r["op"], r["applied"], sent["op"])


def test_each_event_is_what_a_single_writer_replaying_the_log_decides(hammered: dict[str, Any]) -> None:
    """Send the same operations, in event-index order, to a fresh store from one thread: every
    decision, reason and head must come out the same, and so must the final frontier. A write decided
    on a stale cell and appended late (a lost update) would differ here."""
    sent = {rec["sent"]["op_id"]: rec["sent"] for rec in hammered["records"]}
    heads = {rec["receipt"]["event_index"]: rec["receipt"]["head"] for rec in hammered["records"]}
    with pmem.open(":memory:") as single:
        for e in hammered["log"]:
            r = single.apply([sent[e["op_id"]]])[0]
            assert r.event_index == e["event_index"]
            assert (r.op, r.applied, r.reason) == (e["op"], e["applied"], e.get("reason")), (e, r)
            assert heads[e["event_index"]] == (None if r.head is None else list(r.head)), (e, r)
        assert single.frontier() == hammered["frontier"]


def test_the_projection_read_equals_the_fold_of_the_log(hammered: dict[str, Any]) -> None:
    assert hammered["projected"] == hammered["folded"]


def test_decisions_and_final_state_equal_the_test_reference_model_fed_the_log(hammered: dict[str, Any]) -> None:
    sent = {rec["sent"]["op_id"]: rec["sent"] for rec in hammered["records"]}
    cells: dict[str, RefCell] = {}
    for e in hammered["log"]:
        s = sent[e["op_id"]]
        applied, effective = cells.setdefault(e["key"], RefCell()).apply(s["op"], s.get("value"), s["trust"])
        assert (e["applied"], e["op"]) == (applied, effective), (e, s)
    expected = {k: c.view() for k, c in cells.items() if c.view()[0] is not None}
    assert {v.key: (v.value, v.status, sorted(v.alternatives)) for v in hammered["frontier"]} == expected


def test_final_state_decisions_and_receipt_heads_equal_a_reference_model_replay_of_the_log(
        refmodel: Any, hammered: dict[str, Any]) -> None:
    problem = disagreement_with_model(lambda: refmodel.Cell(spec=2), hammered)  # edition 2 of the rules
    assert problem is None, problem


def disagreement_with_model(cell_class: Any, hammered: dict[str, Any]) -> str | None:
    """Fold the log in event-index order through ``cell_class`` and describe the first disagreement.

    Every event in the log names a value: the one sent, or for a value-less support/revoke/reject
    the head's value it acted on. So the value fed to the model is the one the operation was sent with
    (found by op_id), checked against the log's value wherever the operation named one.
    """
    sent = {rec["sent"]["op_id"]: rec["sent"] for rec in hammered["records"]}
    cells: dict[str, Any] = {}
    heads_after: dict[int, Any] = {}
    for e in hammered["log"]:
        s = sent[e["op_id"]]
        assert (e["key"], e["requested"], e["trust"]) == (s["key"], s["op"], s["trust"]), (e, s)
        if s.get("value") is not None:
            assert e["value"] == s["value"], (e, s)
        cell = cells.setdefault(e["key"], cell_class())
        applied, effective, _ = cell.apply(s["op"], s.get("value"), s["trust"])
        if (e["applied"], e["op"]) != (applied, effective):
            return (f"event {e['event_index']} ({s['op']} {s.get('value')!r} trust {s['trust']} on "
                    f"{e['key']}): log says {e['op']} (applied={e['applied']}), model says {effective} "
                    f"(applied={applied})")
        state = cell.state()
        heads_after[e["event_index"]] = None if state is None else [state["value"], state["status"]]
    for rec in hammered["records"]:
        r = rec["receipt"]
        if r["head"] != heads_after[r["event_index"]]:
            return f"receipt {r} reports head {r['head']}, model has {heads_after[r['event_index']]}"
    expected = {k: (s["value"], s["status"], s["alternatives"])
                for k, c in cells.items() if (s := c.state()) is not None}
    actual = {v.key: (v.value, v.status, sorted(v.alternatives)) for v in hammered["frontier"]}
    return None if actual == expected else f"frontier {actual} != model {expected}"

