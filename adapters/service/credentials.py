"""Credentials for the servers (``pmem serve``, ``pmem mcp``): who may read and write what, kept in the
store itself (the same SQLite file or PostgreSQL schema as the log), so every server process on one
store sees the same keys, and a revocation at once.

A token reads ``pmem_<key_id>_<secret>``: the key id finds the row, and only the SHA-256 of the whole
token is stored, compared in constant time. The token is shown once, by :meth:`Credentials.add`.

Two tables:

- ``pmem_credentials``: one row per key (namespaces, source, max trust, read-only, created, revoked);
- ``pmem_credential_audit``: append-only, one row per creation and per revocation (what, key id, when,
  details), so who could write what, and when, can be audited after the fact.

:meth:`Credentials.authenticate` reads the table on every call: there is no cache to go stale, so a
key revoked through one process stops working in every other on its next request.
"""

from __future__ import annotations

import builtins
import hashlib
import hmac
import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pmem.domain.errors import Forbidden, InvalidOperation, StoreUnavailable, Unauthorized
from pmem.domain.operations import MAX_FIELD_CHARS, checked_namespace, shown, string_problem

__all__ = ["Credential", "Credentials", "Forbidden", "LocalOpening", "Unauthorized"]

TABLE = "pmem_credentials"
AUDIT = "pmem_credential_audit"
LOCK = "credentials"
PREFIX = "pmem_"
KEY_ID_HEX = 12
COLUMNS: dict[str, type] = {"key_id": str, "token_hash": str, "namespaces": str, "source": str, "max_trust": int,
                            "read_only": int, "created_at": str, "revoked_at": str}
AUDIT_COLUMNS: dict[str, type] = {"key_id": str, "what": str, "at": str, "details": str}


@dataclass(frozen=True)
class Credential:
    """What one token allows: these namespaces (the first is the default), writing as ``source`` with
    trust at most ``max_trust``, or only reading."""

    key_id: str
    namespaces: tuple[str, ...]
    source: str
    max_trust: int
    read_only: bool


class Credentials:
    """The credentials of one store, over its projection database (``store.projection_db``)."""

    def __init__(self, db: Any) -> None:
        self.db = db
        self._ready = False

    def add(self, namespaces: Sequence[str], source: str, max_trust: int,
            read_only: bool = False) -> tuple[Credential, str]:
        """Create a key; return it and its token (the only time the token is seen: only its hash is kept)."""
        cred = Credential(secrets.token_hex(KEY_ID_HEX // 2), _checked_namespaces(namespaces),
                          _checked_source(source), _checked_trust(max_trust), bool(read_only))
        token = f"{PREFIX}{cred.key_id}_{secrets.token_urlsafe(32)}"
        now = _now()
        details = {"namespaces": list(cred.namespaces), "source": cred.source, "max_trust": cred.max_trust,
                   "read_only": cred.read_only}
        self._ensure()
        with self._writing():
            self.db.execute(f"INSERT INTO {TABLE} (key_id, token_hash, namespaces, source, max_trust, read_only, "
                            "created_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?, NULL)",
                            (cred.key_id, _hash(token), json.dumps(list(cred.namespaces)), cred.source,
                             cred.max_trust, int(cred.read_only), now))
            self._audit("created", cred.key_id, now, details)
        return cred, token

    def list(self) -> builtins.list[dict[str, Any]]:
        """Every key, oldest first, without its hash."""
        if not self._exists():
            return []
        rows = self._read(f"SELECT key_id, namespaces, source, max_trust, read_only, created_at, revoked_at "
                          f"FROM {TABLE} ORDER BY created_at, key_id")
        return [{"key_id": r[0], "namespaces": json.loads(r[1]), "source": r[2], "max_trust": int(r[3]),
                 "read_only": bool(r[4]), "created_at": r[5], "revoked_at": r[6]} for r in rows]

    def revoke(self, key_id: str) -> dict[str, Any]:
        """Revoke ``key_id`` from now on (a second revocation changes nothing); return its row."""
        if not isinstance(key_id, str) or not self._exists():
            raise InvalidOperation(f"no credential {shown(key_id)}", field="key_id")
        now = _now()
        with self._writing():
            row = self.db.execute(f"SELECT revoked_at FROM {TABLE} WHERE key_id = ?", (key_id,)).fetchone()
            if row is None:
                raise InvalidOperation(f"no credential {shown(key_id)}", field="key_id")
            if row[0] is None:
                self.db.execute(f"UPDATE {TABLE} SET revoked_at = ? WHERE key_id = ?", (now, key_id))
                self._audit("revoked", key_id, now, {})
        return next(r for r in self.list() if r["key_id"] == key_id)

    def authenticate(self, token: object) -> Credential:
        """The live credential of ``token``; :class:`Unauthorized` for a missing, malformed, unknown or
        revoked one (read from the table on every call: a revocation anywhere counts at once)."""
        key_id = _key_id(token)
        if key_id is None or not self._exists():
            raise Unauthorized("missing or malformed token (expected Authorization: Bearer pmem_...)")
        rows = self._read(f"SELECT token_hash, namespaces, source, max_trust, read_only, revoked_at FROM {TABLE} "
                          "WHERE key_id = ?", (key_id,))
        assert isinstance(token, str)
        if not rows or not hmac.compare_digest(rows[0][0], _hash(token)):
            raise Unauthorized("unknown token")
        _, namespaces, source, max_trust, read_only, revoked_at = rows[0]
        if revoked_at is not None:
            raise Unauthorized(f"token {key_id} was revoked at {revoked_at}")
        return Credential(key_id, tuple(json.loads(namespaces)), source, int(max_trust), bool(read_only))

    def any_active(self) -> bool:
        """Whether at least one key is not revoked (a server refuses to start open without ``--insecure-local``
        only when none is)."""
        return self._exists() and bool(self._read(f"SELECT 1 FROM {TABLE} WHERE revoked_at IS NULL LIMIT 1"))

    def audit(self) -> builtins.list[dict[str, Any]]:
        """The audit trail, oldest first: ``{"what": "created"|"revoked", "key_id", "at", "details"}``."""
        if not self._exists():
            return []
        rows = self._read(f"SELECT what, key_id, at, details FROM {AUDIT} ORDER BY at, what")
        return [{"what": r[0], "key_id": r[1], "at": r[2], "details": json.loads(r[3])} for r in rows]

    # -- the tables ------------------------------------------------------------
    def _exists(self) -> bool:
        if not self._ready:
            try:
                self._ready = TABLE in self.db.names()
            except self.db.errors as e:
                raise StoreUnavailable(f"cannot read credentials: {_first_line(e)}") from e
        return self._ready

    def _ensure(self) -> None:
        if self._exists():
            return
        with self._writing():
            self.db.ensure_table(TABLE, COLUMNS, ["key_id"], nullable=["revoked_at"])
            self.db.ensure_table(AUDIT, AUDIT_COLUMNS, ["key_id", "what"])
        self._ready = True

    def _writing(self) -> Any:
        return _Guarded(self.db, self.db.write(LOCK))

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> builtins.list[Any]:
        try:
            return builtins.list(self.db.execute(sql, params).fetchall())
        except self.db.errors as e:
            raise StoreUnavailable(f"cannot read credentials: {_first_line(e)}") from e

    def _audit(self, what: str, key_id: str, at: str, details: dict[str, Any]) -> None:
        self.db.execute(f"INSERT INTO {AUDIT} (key_id, what, at, details) VALUES (?, ?, ?, ?)",
                        (key_id, what, at, json.dumps(details)))


class LocalOpening:
    """Whether an ``--insecure-local`` server may still answer a request without a token: only while its
    store has no active credential. Asked on every tokenless request (over any handle of the store:
    ``credentials``); once a credential is seen the opening shuts for the rest of the process (revoking
    every key later does not reopen it), so a shut server reads nothing more here, and an open one reads
    one row at most (``LIMIT 1``)."""

    def __init__(self) -> None:
        self.shut = False

    def is_open(self, credentials: Credentials) -> bool:
        if not self.shut and credentials.any_active():
            self.shut = True
        return not self.shut


class _Guarded:
    """A write transaction whose driver errors come out as :class:`StoreUnavailable`."""

    def __init__(self, db: Any, inner: Any) -> None:
        self.db, self.inner = db, inner

    def __enter__(self) -> None:
        try:
            self.inner.__enter__()
        except self.db.errors as e:
            raise StoreUnavailable(f"cannot write credentials: {_first_line(e)}") from e

    def __exit__(self, *exc: Any) -> bool:
        try:
            return bool(self.inner.__exit__(*exc))
        except self.db.errors as e:
            raise StoreUnavailable(f"cannot write credentials: {_first_line(e)}") from e


def _key_id(token: object) -> str | None:
    """The key id a token names, or None when it is not shaped like one of ours."""
    if not isinstance(token, str) or not token.startswith(PREFIX) or len(token) > 200 or not token.isascii():
        return None
    key_id = token[len(PREFIX):len(PREFIX) + KEY_ID_HEX]
    if len(key_id) != KEY_ID_HEX or token[len(PREFIX) + KEY_ID_HEX:len(PREFIX) + KEY_ID_HEX + 1] != "_":
        return None
    return key_id if all(c in "0123456789abcdef" for c in key_id) else None


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _checked_namespaces(namespaces: Sequence[str]) -> tuple[str, ...]:
    if isinstance(namespaces, str) or not namespaces:
        raise InvalidOperation("a credential needs at least one namespace", field="namespace")
    return tuple(dict.fromkeys(checked_namespace(ns) for ns in namespaces))


def _checked_source(source: object) -> str:
    problem = string_problem(source, "source", MAX_FIELD_CHARS, blank=False)
    if problem is not None:
        raise InvalidOperation(f"credential source: {problem}", field="source")
    assert isinstance(source, str)
    return source


def _checked_trust(trust: object) -> int:
    if not isinstance(trust, int) or isinstance(trust, bool) or not 0 <= trust <= 100:
        raise InvalidOperation(f"max trust must be an integer from 0 to 100, got {shown(trust)}", field="max_trust")
    return trust


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]
