"""The export format of a log (``pmem export``, ``pmem import``): JSON lines, read and written as a stream.

::

    {"pmem_export": 1, "source": "sqlite", "key_edition": 2, "key_edition_since": null,
     "after": 0, "namespace": null, "last_index": 3}
    {"i": 1, "cell": "<id hex>", "rev": 1, "topic": "pmem.cell/Accepted", "state": "<stored JSON, as text>"}
    ...                                  every event with index after..last_index, in index order
    {"op_id": ["<namespace>", "<op id>", 2]}          the op-id table (resent op ids find their receipt)
    {"key": ["<id hex>", 1, "<base64 data key>"]}      the data keys of the cells that still have one
    {"end": {"events": 3, "op_ids": 1, "keys": 2}}

An event's ``state`` is the stored bytes exactly (a JSON string, so nothing is re-encoded): sealed
fields stay sealed. A forgotten cell has no key (its ``Forgotten`` event deleted it), so it travels
as forgotten: ciphertext nobody can open, and no key. The trailer says the file is complete; the
header's ``last_index`` says where the events must stop.

:class:`ExportReader` checks a file as it goes and raises :class:`BadExport` (one line: the file, the
line, what is wrong) at the first problem; the importer runs inside one transaction, so nothing is
written then.
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Iterable, Iterator
from typing import Any, cast

import orjson

from pmem.domain.errors import InvalidOperation

FORMAT = 1  # the newest format version this release reads and writes
EventRow = tuple[int, str, int, str, bytes]  # (index, cell id hex, revision, topic, stored state)
OpIdRow = tuple[str, str, int]  # (namespace, op id, event index)
KeyRow = tuple[str, int, bytes]  # (cell id hex, life, key)
_HEX_ID = re.compile(r"[0-9a-f]{32}")


class BadExport(InvalidOperation):
    """An export file that cannot be imported (damaged, truncated, reordered, newer, partial)."""

    kind = "bad export"


def header_line(source: str, key_edition: int, since: int | None, after: int, namespace: str | None,
                last_index: int) -> bytes:
    return orjson.dumps({"pmem_export": FORMAT, "source": source, "key_edition": key_edition,
                         "key_edition_since": since, "after": after, "namespace": namespace,
                         "last_index": last_index}) + b"\n"


def event_line(row: EventRow) -> bytes:
    index, cell, rev, topic, state = row
    return orjson.dumps({"i": index, "cell": cell, "rev": rev, "topic": topic,
                         "state": bytes(state).decode("utf-8")}) + b"\n"


def op_id_line(row: OpIdRow) -> bytes:
    return orjson.dumps({"op_id": [row[0], row[1], int(row[2])]}) + b"\n"


def key_line(row: KeyRow) -> bytes:
    return orjson.dumps({"key": [row[0], int(row[1]), binascii.b2a_base64(bytes(row[2]), newline=False).decode()]}
                        ) + b"\n"


def end_line(events: int, op_ids: int, keys: int) -> bytes:
    return orjson.dumps({"end": {"events": events, "op_ids": op_ids, "keys": keys}}) + b"\n"


class ExportReader:
    """One pass over an export's lines, section by section: :attr:`header`, then :meth:`events`,
    :meth:`op_ids`, :meth:`keys` and :meth:`finish`, each consumed in that order."""

    def __init__(self, lines: Iterable[bytes], name: str) -> None:
        self.name = name
        self._lines = enumerate(lines, 1)
        self._held: tuple[int, dict[str, Any]] | None = None
        self.counts = {"events": 0, "op_ids": 0, "keys": 0}
        self.line = 0
        self.header = self._header()
        self.last_index = int(self.header["last_index"])

    def fail(self, what: str, line: int | None = None) -> BadExport:
        where = f"{self.name} line {line if line is not None else self.line}"
        return BadExport(f"{where}: {what}", field="file")

    def _next(self) -> dict[str, Any] | None:
        """The next line's object (None at the end of the file)."""
        if self._held is not None:
            (self.line, obj), self._held = self._held, None
            return obj
        for n, raw in self._lines:
            self.line = n
            if not raw.strip():
                continue
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError as e:
                raise self.fail(f"damaged line (not JSON: {e})") from None
            if not isinstance(obj, dict) or len(obj) == 0:
                raise self.fail("damaged line (not a JSON object)")
            return obj
        return None

    def _hold(self, obj: dict[str, Any]) -> None:
        self._held = (self.line, obj)

    def _header(self) -> dict[str, Any]:
        obj = self._next()
        if obj is None:
            raise self.fail("empty file: no header line (is it a pmem export?)", 1)
        version = obj.get("pmem_export")
        if not isinstance(version, int) or isinstance(version, bool):
            raise self.fail("the first line is not a pmem export header (missing \"pmem_export\")")
        if version > FORMAT:
            raise self.fail(f"export format {version} is newer than this release reads ({FORMAT}): upgrade pmem")
        for name in ("last_index", "after", "key_edition"):
            if not _count(obj.get(name)):
                raise self.fail(f"header field {name!r} must be a non-negative integer")
        since = obj.get("key_edition_since")
        if since is not None and not _count(since):
            raise self.fail("header field 'key_edition_since' must be a non-negative integer or null")
        if obj["after"] != 0 or obj.get("namespace") is not None:
            raise self.fail("a partial export (--after or --namespace) cannot be imported: export the whole log")
        return obj

    def events(self) -> Iterator[EventRow]:
        """The event rows, checked: indices run after+1 .. last_index with no gap, no repeat, in order."""
        expected = int(self.header["after"]) + 1
        while (obj := self._next()) is not None:
            if "i" not in obj:
                self._hold(obj)
                break
            row = self._event(obj)
            if row[0] != expected:
                raise self.fail(_out_of_order(row[0], expected))
            if row[0] > self.last_index:
                raise self.fail(f"event index {row[0]} is past the header's last index {self.last_index}")
            expected += 1
            self.counts["events"] += 1
            yield row
        if expected - 1 != self.last_index:
            raise self.fail(f"the events end at index {expected - 1}, before the header's last index "
                            f"{self.last_index} (a truncated export?)")

    def _event(self, obj: dict[str, Any]) -> EventRow:
        i, cell, rev, topic, state = (obj.get(k) for k in ("i", "cell", "rev", "topic", "state"))
        if not (_count(i) and _count(rev) and _cell_id(cell) and isinstance(topic, str) and isinstance(state, str)):
            raise self.fail("damaged event line (expected i, cell, rev, topic, state)")
        return cast(EventRow, (i, cell, rev, topic, state.encode("utf-8")))  # each checked above

    def op_ids(self) -> Iterator[OpIdRow]:
        for value in self._section("op_id"):
            if not (isinstance(value, list) and len(value) == 3 and isinstance(value[0], str)
                    and isinstance(value[1], str) and _count(value[2]) and 0 < value[2] <= self.last_index):
                raise self.fail("damaged op_id line (expected [namespace, op id, event index of this log])")
            self.counts["op_ids"] += 1
            yield value[0], value[1], value[2]

    def keys(self) -> Iterator[KeyRow]:
        for value in self._section("key"):
            try:
                cell, life, raw = value
                key = binascii.a2b_base64(raw, strict_mode=True)
            except (TypeError, ValueError, binascii.Error):
                raise self.fail("damaged key line (expected [cell id, life, base64 key])") from None
            if not (_cell_id(cell) and _count(life) and len(key) == 32):
                raise self.fail("damaged key line (expected [cell id, life, 32-byte key])")
            self.counts["keys"] += 1
            yield cell, life, key

    def _section(self, name: str) -> Iterator[Any]:
        while (obj := self._next()) is not None:
            if name not in obj:
                self._hold(obj)
                return
            yield obj[name]

    def finish(self) -> dict[str, int]:
        """Check the trailer (its counts) and that nothing follows it; the counts read."""
        obj = self._next()
        if obj is None:
            raise self.fail("the file ends without its \"end\" line (a truncated export?)")
        if "end" not in obj:
            raise self.fail(f"unexpected line (sections run events, op_id, key, end): keys {sorted(obj)[:3]}")
        if obj["end"] != self.counts:
            raise self.fail(f"the end line counts {obj['end']}, the file holds {self.counts}")
        if self._next() is not None:
            raise self.fail("a line follows the \"end\" line")
        return dict(self.counts)


def _cell_id(v: object) -> bool:
    """A cell id as stored: 32 lowercase hex digits."""
    return isinstance(v, str) and _HEX_ID.fullmatch(v) is not None


def _count(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _out_of_order(got: int, expected: int) -> str:
    if got == expected - 1:
        return f"event index {got} repeats (a duplicate line)"
    if got < expected:
        return f"event index {got} comes after {expected - 1} (reordered lines)"
    return f"event index {got} where {expected} was expected (a missing or reordered line)"
