"""The same operations, sent to the local store and to the remote one, give the same receipts, the same
errors, the same histories and the same cell as of every event, for generated sequences of typed
operations (Hypothesis), on SQLite and PostgreSQL.

Each example writes one fresh namespace locally and another through the server. Event indices are
global, so they are compared as positions in the sequence."""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pmem
from tests.conftest import examples
from tests.contract.conftest import SOURCE, Served

OPS = ("accept", "contest", "reject", "revoke", "resolve", "support")
Step = tuple[str, str, str | None, int]

steps = st.lists(st.tuples(st.sampled_from(OPS), st.sampled_from(("a", "b")),
                           st.sampled_from(("1", "2", "3", None)), st.sampled_from((30, 60, 90))),
                 min_size=1, max_size=12)


def _run(store: Any, ops: list[Step], namespace: str) -> list[Any]:
    """Each step's receipt, or its error as (class, message)."""
    out: list[Any] = []
    for op, key, value, trust in ops:
        try:
            out.append(getattr(store, op)(key, value, source=SOURCE, trust=trust, namespace=namespace))
        except pmem.PmemError as e:
            out.append((type(e), str(e)))
    return out


def _positions(results: list[Any]) -> dict[int, int]:
    return {r.event_index: n for n, r in enumerate(results) if isinstance(r, pmem.Receipt)}


def _shape(results: list[Any], at: dict[int, int]) -> list[Any]:
    return [r if not isinstance(r, pmem.Receipt) else
            (at[r.event_index], r.key, r.op, r.requested, r.applied, r.reason, r.head) for r in results]


def _versions(h: pmem.History, at: dict[int, int]) -> list[Any]:
    return [(v.vid, v.value, v.status, v.supersedes, v.alternative_of, v.trust, v.support, v.sources,
             [(at[o], None if c is None else at[c]) for o, c in v.intervals], [at[i] for i in v.evidence])
            for v in h.versions]


def test_generated_operations_give_the_same_answers_locally_and_remotely(served: Served) -> None:
    @settings(max_examples=examples(12) if "postgresql" in served.db else 25, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(steps)
    def check(ops: list[Step]) -> None:
        here, there = f"l{uuid.uuid4().hex[:12]}", f"r{uuid.uuid4().hex[:12]}"
        with pmem.connect(served.url, served.token(there)) as remote:
            local_results, remote_results = _run(served.admin, ops, here), _run(remote, ops, there)
            at_local, at_remote = _positions(local_results), _positions(remote_results)
            assert _shape(local_results, at_local) == _shape(remote_results, at_remote)
            for key in ("a", "b"):
                assert (_versions(served.admin.history(key, namespace=here), at_local)
                        == _versions(remote.history(key, namespace=there), at_remote))
            for (li, n), ri in zip(sorted(at_local.items()), sorted(at_remote), strict=True):
                for key in ("a", "b"):
                    mine = served.admin.get(key, as_of=li, disclose=["history", "alternatives"], namespace=here)
                    theirs = remote.get(key, as_of=ri, disclose=["history", "alternatives"], namespace=there)
                    assert (mine.value, mine.status, mine.alternatives) == (
                        theirs.value, theirs.status, theirs.alternatives), (n, key)

    check()
