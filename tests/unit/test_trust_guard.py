"""Edition 2 of the trust guard, decided in the domain: an observation never closes an open version
(the head or an alternative) whose trust is higher than its own. Equal trust may close."""

from __future__ import annotations

from pathlib import Path

import pmem


def contested(path: Path) -> pmem.Store:
    store = pmem.open(path)
    store.accept("k", "A", trust=50)
    store.contest("k", "C", trust=90)
    return store


def test_a_weak_revoke_of_a_trusted_alternative_is_not_applied(tmp_path: Path) -> None:
    with contested(tmp_path / "m.db") as store:
        r = store.revoke("k", "C", trust=10)
        assert (r.applied, r.reason) == (False, "insufficient trust")
        assert store.get("k").alternatives == ("C",)
        assert store.revoke("k", "C", trust=90).applied  # equal trust may close


def test_a_weak_resolve_cannot_contradict_a_trusted_alternative(tmp_path: Path) -> None:
    with contested(tmp_path / "m.db") as store:
        r = store.resolve("k", "A", trust=50)
        assert (r.applied, r.reason) == (False, "insufficient trust")
        assert store.get("k").status == "contested"
        assert store.resolve("k", "A", trust=95).applied


def test_an_accept_that_would_supersede_a_trusted_alternative_is_held_open(tmp_path: Path) -> None:
    with contested(tmp_path / "m.db") as store:
        r = store.accept("k", "B", trust=60)  # above the head's 50, below the alternative's 90
        assert (r.applied, r.op) == (True, "contest")
        assert r.reason == "lowered accept to contest: trust 60 is below the open alternative 'C''s 90"
        assert store.get("k").value == "A"
        assert store.reject("k", "D", trust=60).op == "contest"


def test_a_strong_accept_still_closes_everything(tmp_path: Path) -> None:
    with contested(tmp_path / "m.db") as store:
        r = store.accept("k", "B", trust=90)
        assert (r.applied, r.op) == (True, "accept")
        assert [v.status for v in store.history("k").versions] == ["superseded", "superseded", "active"]
