"""Each remote store method as a plan: a generator that checks its arguments as the local store does,
yields the :class:`~.wire.Request` objects the call needs (one, or a page at a time) and receives each
answer's JSON, then returns the decoded result. The sync and the async store run the same plans, each
with its own HTTP client, so the two cannot drift apart. An error answer is thrown into the plan at its
``yield``, where a plan may translate it (a single write's ``InvalidBatch`` is the local store's
``InvalidOperation``).

Every write carries an op id (one is made when the caller gives none), so the bounded resend of a
write that the server answered 503 (nothing written) can never record it twice (docs/server.md,
"Retries").
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Generator, Iterable, Mapping
from typing import Any, TypeVar
from urllib.parse import quote

from pmem.adapters.client import wire
from pmem.domain.errors import InvalidBatch, InvalidOperation, NotServed
from pmem.domain.operations import Evidence, Operation, checked_count, checked_string, disclosures, optional_count
from pmem.domain.views import CellView, History, Receipt
from pmem.projections.frontier_view import summarize
from pmem.projections.graph import prerequisite_key
from pmem.projections.reading import ReadResult
from pmem.projections.vectors import SearchResult

T = TypeVar("T")
Plan = Generator[wire.Request, Any, T]


def _q(ns: str | None, **params: Any) -> dict[str, Any]:
    """Query parameters: the namespace (None: the credential's first) and those given, None left out."""
    return {k: v for k, v in {"namespace": ns, **params}.items() if v is not None}


def _cell_path(key: object) -> str:
    """The path of a cell's route. The server decodes ``%2F`` before routing, and a path segment of dots
    is removed as a dot segment, so a slash is sent as a space (both are a gap in every key edition, so
    the key normalises alike) and a key of dots percent-encoded."""
    path = quote(checked_string(key, "key").replace("/", " "), safe="")
    return "/v1/cells/" + (path.replace(".", "%2E") if not path.strip(".") else path)


def _no_system(system: object, method: str) -> None:
    if system is not False:
        raise NotServed(f"{method}(system=...)")




# -- writes ----------------------------------------------------------------------------------------------

def _with_op_id(d: Any) -> Any:
    if isinstance(d, dict) and d.get("op_id") is None:
        return {**d, "op_id": uuid.uuid4().hex}
    return d


def _as_json(op: object) -> Any:
    """An operation as its JSON form; anything else is sent as it is, for the server to name its line."""
    if isinstance(op, Operation) and isinstance(op.evidence, Evidence):
        d: dict[str, Any] = {k: v for k, v in op.evidence._asdict().items() if v is not None}
        d.update(op=op.op, namespace=op.namespace, key=op.key)
        if op.op == "revise":
            d.update(new_value=op.value, status="correction" if op.correction else "update",
                     hard_commit=op.hard_commit)
        elif op.value is not None:
            d["value"] = op.value
        if op.old_value is not None:
            d["old_value"] = op.old_value
        return d
    return dict(op) if isinstance(op, Mapping) else op


def apply(operations: Iterable[Operation | Mapping[str, Any]], ns: str | None) -> Plan[list[Receipt]]:
    if isinstance(operations, (str, bytes, Mapping)) or not isinstance(operations, Iterable):
        raise InvalidOperation(f"operations must be a list of operations, got {type(operations).__name__}",
                               field="operations")
    body = [_with_op_id(_as_json(op)) for op in operations]
    if not body:
        return []
    return wire.receipts((yield wire.Request("POST", "/v1/ops", _q(ns), body)))


def one(op: str, key: str, value: str | None, ns: str | None, fields: dict[str, Any]) -> Plan[Receipt]:
    """One operation given as arguments, as the local store's ``Writes.one`` builds it."""
    d: dict[str, Any] = {"op": op, "key": key, **{k: v for k, v in fields.items() if v is not None}}
    if value is not None:
        d["new_value" if op == "revise" else "value"] = value
    try:
        answer = yield wire.Request("POST", "/v1/ops", _q(ns), [_with_op_id(d)])
    except InvalidBatch as e:  # the local store names no line for a single write
        raise InvalidOperation(str(e).removeprefix(f"line {e.line}: "), field=e.field) from None
    return wire.receipts(answer)[0]


def declare_prerequisite(before: str, after: str, ns: str | None, fields: dict[str, Any]) -> Plan[Receipt]:
    for name, v in (("before", before), ("after", after)):
        checked_string(v, name)
    key = prerequisite_key(before, after)
    return (yield from one("accept", key, json.dumps([before, after]), ns, fields))


# -- reads -----------------------------------------------------------------------------------------------

def get(key: str, as_of: int | None, disclose: Iterable[str], ns: str | None) -> Plan[CellView]:
    """A cell; with disclosures, built from its history (one request, so the view and its versions agree)."""
    path, modes = _cell_path(key), disclosures(disclose)
    params = _q(ns, as_of=optional_count(as_of, "as_of", "a non-negative event index"))
    if not modes:
        return wire.cell((yield wire.Request("GET", path, params)))
    h = wire.history((yield wire.Request("GET", path + "/history", params)))
    return summarize(h.namespace, h.key, [(v.value, v.status) for v in h.versions], h.versions).view(modes)


def get_many(keys: Iterable[str], ns: str | None) -> Plan[dict[str, CellView]]:
    if isinstance(keys, (str, bytes)) or not isinstance(keys, Iterable):
        raise InvalidOperation(f"keys must be a list of keys, got {type(keys).__name__}", field="keys")
    out: dict[str, CellView] = {}
    for key in keys:
        view = yield from get(key, None, (), ns)
        out[view.key] = view
    return out


def history(key: str, as_of: int | None, ns: str | None) -> Plan[History]:
    params = _q(ns, as_of=optional_count(as_of, "as_of", "a non-negative event index"))
    return wire.history((yield wire.Request("GET", _cell_path(key) + "/history", params)))


def frontier(as_of: int | None, disclose: Iterable[str], ns: str | None, system: bool, after: str | None,
             limit: int | None, page: int) -> Plan[list[CellView]]:
    """Every cell of the namespace by key, a page at a time; with disclosures, each cell read with them."""
    _no_system(system, "frontier")
    as_of = optional_count(as_of, "as_of", "a non-negative event index")
    limit = optional_count(limit, "limit", "a non-negative number of cells")
    modes = disclosures(disclose)
    cells: list[CellView] = []
    cursor = None if after is None else checked_string(after, "after")
    while limit is None or len(cells) < limit:
        want = page if limit is None else min(page, limit - len(cells))
        answer = yield wire.Request("GET", "/v1/frontier", _q(ns, as_of=as_of, cursor=cursor, limit=want))
        cells += [wire.cell(d) for d in answer["cells"]]
        cursor = answer["next_cursor"]
        if cursor is None:
            break
    if not modes:
        return cells
    disclosed = []
    for c in cells:
        disclosed.append((yield from get(c.key, as_of, modes, ns)))
    return disclosed


def log(after: int, limit: int | None, ns: str | None, as_of: int | None, page: int) -> Plan[list[dict[str, Any]]]:
    """The namespace's events after ``after``, a page at a time, up to ``as_of``."""
    as_of = optional_count(as_of, "as_of", "a non-negative event index")
    after = checked_count(after, "after", "a non-negative event index")
    limit = optional_count(limit, "limit", "a non-negative number of events")
    events: list[dict[str, Any]] = []
    while limit is None or len(events) < limit:
        want = page if limit is None else min(page, limit - len(events))
        rows = yield wire.Request("GET", "/v1/log", _q(ns, after=after, limit=want))
        for row in rows:
            if as_of is not None and row["event_index"] > as_of:
                return events
            events.append(row)
        if len(rows) < want:
            break
        after = rows[-1]["event_index"]
    return events


def stats(ns: str | None) -> Plan[dict[str, Any]]:
    answer = yield wire.Request("GET", "/v1/stats", _q(ns))
    return dict(answer)


def last_index(ns: str | None) -> Plan[int]:
    return int((yield from stats(ns))["events"])


def search(query: str, k: int, as_of: int | None, ns: str | None, system: bool,
           ranking: str) -> Plan[list[SearchResult]]:
    _no_system(system, "search")
    params = _q(ns, q=checked_string(query, "query"), k=checked_count(k, "k", "a positive number of cells",
                                                                       minimum=1),
                as_of=optional_count(as_of, "as_of", "a non-negative event index"), ranking=ranking)
    return wire.search_results((yield wire.Request("GET", "/v1/search", params)))


def read(question: str, ns: str | None, args: dict[str, Any]) -> Plan[ReadResult]:
    """The context for ``question``: ``args`` are ``Store.read``'s other arguments, sent by name."""
    body = {"question": question, **{k: (list(v) if isinstance(v, (tuple, set, frozenset)) else v)
                                     for k, v in args.items()}}
    return wire.read_result((yield wire.Request("POST", "/v1/read", _q(ns), body)))


def what_next(k: int, previous: str | None, as_of: int | None, ns: str | None,
              system: bool) -> Plan[list[dict[str, Any]]]:
    _no_system(system, "what_next")
    params = _q(ns, k=checked_count(k, "k", "a positive number of proposals", minimum=1), previous=previous,
                as_of=optional_count(as_of, "as_of", "a non-negative event index"))
    return list((yield wire.Request("GET", "/v1/next", params)))
