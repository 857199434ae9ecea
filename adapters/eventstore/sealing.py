"""Sealing: the values, evidence texts, sources and reasons of a stored event, encrypted under its
cell's data key (AES-256-GCM, the ``cryptography`` package), so that forgetting a cell is destroying
one key (crypto-shredding, docs/forgetting.md).

A sealed event's stored JSON has those fields removed and one field added::

    "_sealed": [life, ["value", "text", ...], "<base64 of nonce + ciphertext>"]

``life`` is the cell revision at which the key was made (a forgotten cell's next write makes a new
key, so a new life); the names say which fields the ciphertext holds (a field that was ``None`` is
stored as it was); the ciphertext is the JSON list of their values. The associated data binds it to
the cell, the event's revision and the field names, so a blob moved to another event or cell does
not open. Keys live in the table ``pmem_keys`` (cell id hex, life, key) of the store's own database,
written in the transaction that appends the event that first needs one and deleted in the
transaction that appends ``Forgotten``. An event whose key is gone (or whose life is not the key's)
reads :data:`~pmem.domain.state.FORGOTTEN_TEXT` in every sealed field; so does a scrubbed event
(life 0: an event written before sealing existed, rewritten when its cell was forgotten).

Keys are cached per process (:data:`CACHE`, by store and cell) as their bytes; the ``AESGCM`` object
that uses one is built when it is asked for (under a microsecond) and held only by its caller (a
write's chunk, a fold): an ``AESGCM`` object weighs about 2.4 KB, the bytes a few dozen.
A process drops a cell's key when it forgets the cell or reads its ``Forgotten`` event, and every read
of stored events loads the keys of the cells it reads again (:meth:`Keyring.refresh`, one query per
batch): a key another process has destroyed is never used from the cache to open an old event. The
write path uses the cache; a stale key there meets a version conflict first (the other process
appended ``Forgotten``), and the retry reads the cell again.
"""

from __future__ import annotations

import binascii
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from pmem.domain.state import FORGOTTEN_TEXT

SEALED = "_sealed"
FIELDS = ("value", "rejected", "text", "source", "reason")  # what sealing hides; keys and numbers stay plain
FORGOTTEN_TOPIC = "pmem.cell/Forgotten"
SCRUBBED_LIFE = 0  # no key ever has it: lives are cell revisions, from 1
Key = tuple[int, AESGCM]  # (life, cipher)
RawKey = tuple[int, bytes]  # (life, key bytes): what the cache holds
Fetch = Callable[[list[str]], dict[str, tuple[int, bytes]]]  # cell ids hex -> (life, key bytes) of those found

# (store label, cell id hex) -> (life, key bytes): every keyring of a process shares it
CACHE: dict[tuple[str, str], RawKey] = {}
MAX_CACHED = 200_000  # about 0.3 KB a key with its entry: the cache stays under about 60 MB


def key_scope(backend: Any) -> str:
    """The name a store's keys are cached under: its resolved file, its in-memory database's name, or
    its PostgreSQL URL (without password) and schema (cell ids repeat across stores)."""
    path = getattr(backend, "path", None)
    if path is not None:
        return str(Path(path).resolve())
    schema = getattr(backend, "schema", None)
    return f"{backend.label}#{schema}" if schema is not None else str(getattr(backend, "db", backend.label))


def new_key(life: int) -> tuple[Key, bytes]:
    """A fresh data key for a cell life starting at revision ``life``: the cached form and the bytes
    (32 random bytes, as ``AESGCM.generate_key(bit_length=256)`` makes them, from the pooled OS bytes)."""
    raw = _RANDOM.take(32)
    return (life, AESGCM(raw)), raw


def _cipher(held: RawKey) -> Key:
    return held[0], AESGCM(held[1])


def _aad(cell: str, revision: int, names: Iterable[str]) -> bytes:
    return f"pmem-seal-1|{cell}|{revision}|{','.join(names)}".encode()


class _RandomPool:
    """Random bytes from the OS, read 48 KiB at a time: one ``os.urandom`` per event's nonce (or per new
    key) cost as much as the encryption. Taken under a lock (two threads must never get the same bytes);
    a forked child starts a pool of its own. Nonces are random 12-byte ones, fresh per event, as AES-GCM
    with random nonces needs; keys are 32 bytes."""

    SIZE = 12 * 4096

    def __init__(self) -> None:
        self.pool, self.at = b"", 0
        self.lock = threading.Lock()

    def take(self, n: int) -> bytes:
        """``n`` bytes no caller in this process has had."""
        with self.lock:
            if n > self.SIZE:
                return os.urandom(n)
            if self.at + n > len(self.pool):
                self.pool, self.at = os.urandom(self.SIZE), 0
            self.at += n
            return self.pool[self.at - n:self.at]

    def reset(self) -> None:
        self.pool, self.at = b"", 0
        self.lock = threading.Lock()


_RANDOM = _RandomPool()
os.register_at_fork(after_in_child=_RANDOM.reset)


def nonces(n: int) -> bytes:
    """``n`` fresh nonces for :func:`seal`, 12 bytes each, never handed out twice in this process."""
    return _RANDOM.take(12 * n)


def seal(fields: dict[str, Any], cell: str, revision: int, key: Key, nonce: bytes | None = None) -> dict[str, Any]:
    """``fields``, changed in place: the set ones of :data:`FIELDS` sealed under ``key``, with ``nonce``
    (one of :func:`nonces`; None: a fresh one)."""
    names = [n for n in FIELDS if fields.get(n) is not None]
    if not names:
        return fields
    plain = orjson.dumps([fields.pop(n) for n in names])
    if nonce is None:
        nonce = _RANDOM.take(12)
    box = key[1].encrypt(nonce, plain, _aad(cell, revision, names))
    fields[SEALED] = [key[0], names, binascii.b2a_base64(nonce + box, newline=False).decode("ascii")]
    return fields


def scrubbed(fields: dict[str, Any]) -> dict[str, Any] | None:
    """A plaintext (never sealed) event's fields with the set ones of :data:`FIELDS` replaced by an
    unopenable seal of life 0, or None when it holds none of them."""
    names = [n for n in FIELDS if fields.get(n) is not None]
    if not names or SEALED in fields:
        return None
    out = {k: v for k, v in fields.items() if k not in names}
    out[SEALED] = [SCRUBBED_LIFE, names, ""]
    return out


class Keyring:
    """The data keys of one store, read through ``fetch`` and cached in :data:`CACHE`."""

    def __init__(self, store: str, fetch: Fetch) -> None:
        self.store, self.fetch = store, fetch
        self.staged: dict[str, tuple[int, bytes]] = {}  # a rebuild's range of keys, raw (see absorb)
        # new keys a streamed batch holds back from the table until its flush (see .write_behind)
        self.unstored: dict[str, tuple[int, bytes]] = {}

    def get(self, cell: str) -> Key | None:
        found = CACHE.get((self.store, cell))
        return _cipher(found) if found is not None else self.lookup([cell]).get(cell)

    def absorb(self, found: dict[str, tuple[int, bytes]]) -> None:
        """Hold these keys (``cell id hex -> (life, key)``, a range of cells read at once by a rebuild)
        raw, in place of the range held before: a key's cipher object (about 2.4 KB) is built only when
        its cell is folded (:meth:`take`) and let go after it, so a rebuild holds one range's raw keys
        (about 100 bytes a cell), not a cipher per cell of the store."""
        self.staged = found

    def take(self, cell: str) -> Key | None:
        """The key of ``cell`` for folding it: from the held range (:meth:`absorb`, built and cached
        until the caller drops it) or else as :meth:`get` finds it."""
        raw = self.staged.pop(cell, None)
        if raw is None:
            return self.get(cell)
        CACHE[(self.store, cell)] = raw  # (as read: an int and bytes)
        return raw[0], AESGCM(raw[1])

    def prefetch(self, cells: Iterable[str]) -> None:
        """Load the keys of these cells that are not cached (one query per 500), raw: no cipher is
        built until a key is used."""
        self._raw(cells)

    def lookup(self, cells: Iterable[str]) -> dict[str, Key]:
        """The keys of these cells that have one, from the cache or read (one query per 500 missing):
        the caller holds them whatever the cache keeps (it is emptied past :data:`MAX_CACHED` keys)."""
        return {c: _cipher(held) for c, held in self._raw(cells).items()}

    def _raw(self, cells: Iterable[str]) -> dict[str, RawKey]:
        out: dict[str, RawKey] = {}
        missing = []
        store, unstored = self.store, self.unstored
        for c in dict.fromkeys(cells):
            found = CACHE.get((store, c))
            if found is None:
                found = unstored.get(c)
            if found is None:
                missing.append(c)
            else:
                out[c] = found
        if len(CACHE) + len(missing) > MAX_CACHED:
            CACHE.clear()
        for start in range(0, len(missing), 500):
            for cell, (life, raw) in self.fetch(missing[start:start + 500]).items():
                out[cell] = CACHE[(store, cell)] = (int(life), bytes(raw))
        return out

    def refresh(self, cells: Iterable[str]) -> None:
        """Load the keys of these cells again, cached or not: a read of stored events must not open
        what another process has forgotten since this one cached the key."""
        wanted = list(dict.fromkeys(cells))
        self.drop(wanted)
        self.prefetch(wanted)

    def refresh_range(self, cells: tuple[str, str | None], found: dict[str, tuple[int, bytes]]) -> None:
        """Replace the cached keys of a range of cell ids ``[lo, hi)`` with ``found`` (read at once,
        held raw: :meth:`absorb`)."""
        lo, hi = cells
        self.drop([c for s, c in list(CACHE) if s == self.store and c >= lo and (hi is None or c < hi)])
        self.absorb(found)

    def held(self, cell: str) -> RawKey | None:
        """The cached key of ``cell``, raw (None: not cached)."""
        return CACHE.get((self.store, cell))

    def remember(self, cell: str, life: int, raw: bytes) -> None:
        """Cache the key a write just made for ``cell`` (its life and bytes)."""
        CACHE[(self.store, cell)] = (life, raw)

    def drop(self, cells: Iterable[str]) -> None:
        for cell in cells:
            CACHE.pop((self.store, cell), None)

    def drop_all(self) -> None:
        """Forget every cached key of this store (they are read again when needed)."""
        for k in [k for k in CACHE if k[0] == self.store]:
            del CACHE[k]

    def unseal(self, fields: dict[str, Any], cell: str, revision: int) -> dict[str, Any]:
        """``fields`` with their sealed fields opened in place (:data:`FORGOTTEN_TEXT` where the key is
        gone or the blob does not open)."""
        life, names, blob = fields.pop(SEALED)
        key = None if life == SCRUBBED_LIFE else self.get(cell)
        if key is not None and key[0] < life:  # another process forgot the cell since: read again
            self.drop([cell])
            key = self.get(cell)
        values: list[Any] | None = None
        if key is not None and key[0] == life:
            raw = binascii.a2b_base64(blob)
            try:
                values = orjson.loads(key[1].decrypt(raw[:12], raw[12:], _aad(cell, revision, names)))
            except InvalidTag:
                values = None
        if values is None:
            values = [FORGOTTEN_TEXT] * len(names)
        fields.update(zip(names, values, strict=True))
        return fields


def open_with(key: Key | None, fields: dict[str, Any], cell: str, revision: int) -> bool:
    """Open ``fields``' sealed fields in place with ``key`` (the cell's key, looked up once for all
    its events) when it is the key of their life and they open: True. Else (another life, a
    scrubbed event, a blob that does not open) nothing changes and :meth:`Keyring.unseal` decides."""
    life, names, blob = fields[SEALED]
    if key is None or key[0] != life:
        return False
    raw = binascii.a2b_base64(blob)
    try:
        plain = key[1].decrypt(raw[:12], raw[12:], _aad(cell, revision, names))
    except InvalidTag:
        return False
    del fields[SEALED]
    fields.update(zip(names, orjson.loads(plain), strict=True))
    return True


class Plain:
    """A keyring for reading alone where there is no key table to read (a log written before
    sealing, an in-memory copy): every sealed field reads as forgotten."""

    def unseal(self, fields: dict[str, Any], cell: str, revision: int) -> dict[str, Any]:
        _, names, _ = fields.pop(SEALED)
        fields.update(dict.fromkeys(names, FORGOTTEN_TEXT))
        return fields

    def prefetch(self, cells: Iterable[str]) -> None:
        """Nothing to load."""

    def drop(self, cells: Iterable[str]) -> None:
        """Nothing cached."""
