"""Credentials kept in the store: a token shown once, only its hash stored, revocation seen by another
process's handle at once, and the audit trail of creations and revocations (both backends)."""

from __future__ import annotations

import pytest

import pmem
from pmem.adapters.service.credentials import Credentials


def test_add_authenticate_revoke_and_audit(db: str) -> None:
    with pmem.open(db) as a, pmem.open(db) as b:
        creds_a, creds_b = Credentials(a.projection_db), Credentials(b.projection_db)
        assert not creds_a.any_active() and creds_a.list() == []
        cred, token = creds_a.add(["alpha", "beta", "alpha"], "agent-1", 60)
        assert cred.namespaces == ("alpha", "beta") and cred.max_trust == 60 and not cred.read_only
        assert creds_b.authenticate(token) == cred  # another handle on the same store sees it
        assert creds_b.any_active()
        rows = creds_a.list()
        assert [r["key_id"] for r in rows] == [cred.key_id] and rows[0]["revoked_at"] is None
        assert token not in repr(rows) and all("hash" not in k for k in rows[0])
        creds_a.revoke(cred.key_id)
        with pytest.raises(pmem.Unauthorized, match="revoked"):
            creds_b.authenticate(token)  # no cache: the other handle refuses it on its next call
        assert not creds_b.any_active()
        audit = creds_b.audit()
        assert [(e["what"], e["key_id"]) for e in audit] == [("created", cred.key_id), ("revoked", cred.key_id)]
        assert audit[0]["details"] == {"namespaces": ["alpha", "beta"], "source": "agent-1", "max_trust": 60,
                                       "read_only": False}


@pytest.mark.parametrize("token", [None, "", "Bearer x", "pmem_", "pmem_zzzzzzzzzzzz_x", "pmem_0123456789ab_x",
                                   "x" * 500, 42])
def test_bad_tokens_are_unauthorized(db: str, token: object) -> None:
    with pmem.open(db) as s:
        creds = Credentials(s.projection_db)
        _, real = creds.add(["ns"], "me", 10, read_only=True)
        with pytest.raises(pmem.Unauthorized):
            creds.authenticate(token)
        with pytest.raises(pmem.Unauthorized):
            creds.authenticate(real[:-1] + ("A" if real[-1] != "A" else "B"))  # right key id, wrong secret


@pytest.mark.parametrize(("namespaces", "source", "trust"), [([], "s", 1), (["ns"], "", 1), (["ns"], "s", 101),
                                                               (["ns"], "s", -1), ([" "], "s", 1), (["ns"], "s", True)])
def test_bad_credentials_are_refused(db_path: object, namespaces: list[str], source: str, trust: int) -> None:
    with pmem.open(str(db_path)) as s:
        with pytest.raises(pmem.InvalidOperation):
            Credentials(s.projection_db).add(namespaces, source, trust)
        assert Credentials(s.projection_db).list() == []


def test_revoking_an_unknown_key_is_bad_input(db_path: object) -> None:
    with pmem.open(str(db_path)) as s:
        with pytest.raises(pmem.InvalidOperation, match="no credential"):
            Credentials(s.projection_db).revoke("0123456789ab")
