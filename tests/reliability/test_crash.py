"""A writer is killed with SIGKILL at random moments, 200 times in all, split evenly across the backends.

The kills of a backend fall on a few stores in turn (a chain of trials each), so that reading a store
back after each kill costs what a store of a few thousand events costs, not the whole run's log. Each
time, a fresh child process opens the store and appends operations (single calls and small ``apply``
batches, each with a unique op_id), printing every op_id once its commit has returned. It first resends
whatever its killed predecessor had in flight, as a client that never got its receipts would. After each
kill the parent reopens the store and records what it finds; the tests below check that nothing
acknowledged was lost or doubled, that batches stayed atomic, that the database passes its integrity
check, and that the projections read after each kill equal the fold of the log (and, once all kills are
done, a rebuild from index 1).
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import pytest

import pmem
from tests.reliability import workers
from tests.reliability.conftest import BACKENDS, integrity_check, new_store_url
from tests.reliability.tables import projection_rows

TOTAL_TRIALS = 200
TRIALS = TOTAL_TRIALS // len(BACKENDS)
CHAINS = 4  # stores per backend; each takes TRIALS // CHAINS kills in a row
KILL_AFTER_S = (0.02, 0.25)  # after the first acknowledgement
SEED = 20261129
FIRST_ACK_TIMEOUT_S = 60
DISCLOSE = ("history", "alternatives", "support")


@dataclass
class Trial:
    """What one killed writer acknowledged, and what the reopened store held afterwards."""

    number: int
    db: str  # the store of this trial's chain
    resent: list[dict[str, Any]]  # operations the previous writer had in flight, sent again first
    acks: dict[str, tuple[int, bool]] = field(default_factory=dict)  # op_id -> (event index, duplicate)
    sent: dict[str, dict[str, Any]] = field(default_factory=dict)  # op_id -> operation
    in_flight: list[dict[str, Any]] = field(default_factory=list)  # sent, not acknowledged when killed
    log: list[tuple[int, str | None]] = field(default_factory=list)  # (event index, op_id) after reopening
    last_index: int = 0
    integrity: str = ""
    indexed_op_ids: dict[str, int] = field(default_factory=dict)  # the store's op_id -> event index table
    read_error: str | None = None
    projection_equals_fold: bool = False


def fork_writer(db: str, trial: Trial, resend_file: Path, stderr: Path) -> tuple[int, TextIO]:
    """Fork a writer process: ``workers.append`` with its stdout on a pipe, its stderr in a file.
    Forking skips the interpreter start (Python, pmem and its dependencies imported) that a fresh process would
    pay on every trial; the child is still a process of its own, with its own SQLite connections
    (the parent holds none while it forks), and it dies only by the SIGKILL below."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            fd = os.open(stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(fd, 2)
            workers.append(db, f"t{trial.number}", trial.number, str(resend_file), out=os.fdopen(w, "w"))
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(70)
    os.close(w)
    return pid, os.fdopen(r, encoding="utf-8")


def run_and_kill(db: str, trial: Trial, resend_file: Path, rng: random.Random, stderr: Path) -> None:
    """Start a writer, let it acknowledge for a random while, SIGKILL it, and parse what it printed."""
    resend_file.write_text(json.dumps(trial.resent), encoding="utf-8")
    lines: list[str] = []
    first_ack = threading.Event()
    pid, pipe = fork_writer(db, trial, resend_file, stderr)

    def drain() -> None:  # keep the pipe empty, so the writer never blocks on it
        for line in pipe:
            lines.append(line)
            if line.startswith("ack "):
                first_ack.set()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        if not first_ack.wait(FIRST_ACK_TIMEOUT_S):
            pytest.fail(f"trial {trial.number}: the writer acknowledged nothing:\n{stderr.read_text()}")
        time.sleep(rng.uniform(*KILL_AFTER_S))
        done, _ = os.waitpid(pid, os.WNOHANG)
        assert done == 0, f"trial {trial.number}: writer died by itself:\n{stderr.read_text()}"
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        reader.join(timeout=10)
        pipe.close()
    pending: dict[str, dict[str, Any]] = {}
    for line in lines:
        if not line.endswith("\n"):
            continue  # cut short by the kill: never a complete acknowledgement
        kind, _, rest = line.rstrip("\n").partition(" ")
        if kind == "send":
            ops = json.loads(rest)
            pending = {d["op_id"]: d for d in ops}
            trial.sent.update(pending)
        elif kind == "ack":
            op_id, index, duplicate = rest.split(" ")
            trial.acks[op_id] = (int(index), duplicate == "1")
            pending.pop(op_id)
    trial.in_flight = list(pending.values())


def inspect(db: str, trial: Trial) -> None:
    """Reopen the store the way a restarted agent would and record what it holds."""
    with pmem.open(db) as store, pmem.open(db, reader="replay") as replay:
        trial.integrity = integrity_check(store)
        trial.log = [(e["event_index"], e.get("op_id")) for e in store.log()]
        trial.last_index = store.last_index()
        asked = [oid for _, oid in trial.log if oid is not None] + [d["op_id"] for d in trial.in_flight]
        trial.indexed_op_ids = store.log_store.recorder.lookup_op_ids("default", asked)
        try:
            trial.projection_equals_fold = store.frontier(disclose=DISCLOSE) == replay.frontier(disclose=DISCLOSE)
        except Exception as e:  # noqa: BLE001  (recorded, and asserted on by a test)
            trial.read_error = repr(e)


@pytest.fixture(scope="module")
def chains(backend: str, tmp_path_factory: pytest.TempPathFactory) -> list[list[Trial]]:
    """The trials, a list per store: each trial resends what its predecessor in the chain had in flight."""
    tmp = tmp_path_factory.mktemp(f"crash-{backend}")
    rng = random.Random(SEED)
    per_chain = TRIALS // CHAINS
    out: list[list[Trial]] = []
    for c in range(CHAINS):
        db = new_store_url(backend, tmp, name=f"chain{c}")
        done: list[Trial] = []
        for n in range(c * per_chain, (c + 1) * per_chain):
            trial = Trial(n, db, resent=done[-1].in_flight if done else [])
            run_and_kill(db, trial, tmp / "resend.json", rng, tmp / f"writer-{n}.err")
            inspect(db, trial)
            done.append(trial)
        out.append(done)
    return out


@pytest.fixture(scope="module")
def trials(chains: list[list[Trial]]) -> list[Trial]:
    return [t for chain in chains for t in chain]


def in_chain_order(chains: list[list[Trial]]) -> list[tuple[Trial | None, Trial]]:
    """Each trial beside the one before it on the same store (None for a chain's first)."""
    return [(chain[i - 1] if i else None, t) for chain in chains for i, t in enumerate(chain)]


def test_every_acknowledged_operation_survives_the_kill_at_its_event_index(trials: list[Trial]) -> None:
    for t in trials:
        logged = {oid: index for index, oid in t.log}
        for op_id, (index, _) in t.acks.items():
            assert op_id in logged, f"trial {t.number}: acknowledged {op_id} is not in the log after the kill"
            assert logged[op_id] == index, f"trial {t.number}: {op_id} acknowledged as event {index}, " \
                                           f"logged as {logged[op_id]}"


def test_no_operation_is_ever_recorded_twice(trials: list[Trial]) -> None:
    for t in trials:
        twice = [oid for oid, n in Counter(oid for _, oid in t.log).items() if n > 1]
        assert not twice, f"trial {t.number}: op_ids recorded more than once: {twice[:10]}"


def test_the_database_passes_integrity_check_after_every_kill(trials: list[Trial]) -> None:
    assert [(t.number, t.integrity) for t in trials] == [(t.number, "ok") for t in trials]


def test_event_indices_stay_strictly_increasing_and_unique_after_every_kill(chains: list[list[Trial]]) -> None:
    for before, t in in_chain_order(chains):
        previous = before.log if before else []
        indices = [index for index, _ in t.log]
        increasing = all(a < b for a, b in zip(indices, indices[1:], strict=False))
        assert increasing, f"trial {t.number}: indices not increasing"
        assert t.last_index == (indices[-1] if indices else 0)
        assert t.log[:len(previous)] == previous, f"trial {t.number}: an earlier event changed or vanished"


def test_only_the_operations_in_flight_at_the_kill_can_be_recorded_unacknowledged(
        chains: list[list[Trial]]) -> None:
    for before, t in in_chain_order(chains):
        new = {oid for _, oid in t.log} - ({oid for _, oid in before.log} if before else set())
        unacknowledged = new - set(t.acks)
        assert unacknowledged <= {d["op_id"] for d in t.in_flight}, \
            f"trial {t.number}: recorded but never sent or acknowledged: {sorted(map(str, unacknowledged))}"


def test_a_batch_in_flight_at_the_kill_is_recorded_whole_or_not_at_all(trials: list[Trial]) -> None:
    for t in trials:
        logged = {oid for _, oid in t.log}
        in_log = [d["op_id"] in logged for d in t.in_flight]
        assert all(in_log) or not any(in_log), f"trial {t.number}: batch torn by the kill: {t.in_flight}"


def test_the_op_id_table_agrees_with_the_log_after_every_kill(trials: list[Trial]) -> None:
    """A resent operation is deduplicated through this table: a row for an event that was not kept
    would swallow the resend, and a missing row would record it twice."""
    for t in trials:
        assert t.indexed_op_ids == {oid: index for index, oid in t.log if oid is not None}, f"trial {t.number}"


def test_resending_the_operations_a_killed_writer_had_in_flight_records_each_exactly_once(
        chains: list[list[Trial]]) -> None:
    assert sum(len(t.resent) for t in chains[0]), "no trial resent anything: the check below saw nothing"
    for before, t in in_chain_order(chains):
        if before is None:
            assert not t.resent
            continue
        kept = {oid: index for index, oid in before.log}
        for d in t.resent:
            index, duplicate = t.acks[d["op_id"]]
            if d["op_id"] in kept:
                assert (index, duplicate) == (kept[d["op_id"]], True), \
                    f"trial {t.number}: resent {d['op_id']} was kept before the kill but not found again"
            else:
                assert not duplicate, f"trial {t.number}: resent {d['op_id']} called a duplicate of nothing"


def test_the_store_reads_after_every_kill(trials: list[Trial]) -> None:
    assert [(t.number, t.read_error) for t in trials if t.read_error] == []


def test_the_projection_read_after_every_kill_equals_the_fold_of_the_log(trials: list[Trial]) -> None:
    assert [t.number for t in trials if not t.projection_equals_fold] == []


def test_the_projections_left_by_all_the_kills_equal_a_rebuild_from_index_one(chains: list[list[Trial]]) -> None:
    for chain in chains:
        with pmem.open(chain[0].db) as store:
            store.catch_up()
            live = projection_rows(store)
            store.rebuild("frontier")
            store.rebuild("graph")
            assert projection_rows(store) == live
            assert live["cells"], "the comparison saw no rows"


def test_the_kills_land_while_writes_are_in_flight(trials: list[Trial]) -> None:
    """A sanity check on the test itself: most kills must interrupt a call, or the trials prove little."""
    interrupted = sum(bool(t.in_flight) for t in trials)
    assert interrupted >= TRIALS // 2, f"only {interrupted} of {TRIALS} kills interrupted a write"
    assert sum(len(t.acks) for t in trials) >= TRIALS * 10


def test_the_log_left_by_all_the_kills_replays_to_the_state_the_store_reads(chains: list[list[Trial]]) -> None:
    """Sending the recorded operations again, in event-index order, to a fresh single writer decides
    every one the same way: what survived the crashes is a consistent history, not a torn one."""
    for chain in chains:
        sent = {oid: d for t in chain for oid, d in t.sent.items()}
        with pmem.open(chain[0].db) as crashed, pmem.open(":memory:") as single:
            for e in crashed.log():
                r = single.apply([sent[e["op_id"]]])[0]
                assert (r.event_index, r.op, r.applied, r.reason) == \
                    (e["event_index"], e["op"], e["applied"], e.get("reason")), (e, r)
            assert single.frontier() == crashed.frontier()
