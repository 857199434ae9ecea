"""A door shaped like Mem0's ``Memory``, over P-Mem (docs/integrations.md#mem0).

    from pmem.integrations.mem0 import Memory
    m = Memory(db="mem.db")                               # or Memory.from_config({"db": "mem.db"})
    m.add("My 5K PB is now 25:50.", user_id="alice")
    m.search("What is my 5K PB?", user_id="alice")        # {"results": [{"id", "memory", "score", ...}]}

Each user is a P-Mem namespace (``user_id``), each memory a cell of it, and a memory's id is
``USER/KEY``. ``add`` runs P-Mem's extractor (the offline template extractor, or the LLM one when
configured) and writes typed operations, so a new value for a fact supersedes the old one instead of
adding a second memory. Deletes are revokes: ``history`` keeps every version. Metadata lives beside the
memories, in the door's own namespace (``mem0`` by default), one cell per memory.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pmem.adapters.service.ingest import Extractor, Ingestor, llm_settings, make_extractor
from pmem.adapters.sources.record import Record
from pmem.domain.errors import InvalidOperation
from pmem.domain.keys import KEY_EDITION
from pmem.domain.views import CellView, History, Receipt
from pmem.integrations._store import StoreLike, label, page_through, revokes_to_empty

DOOR_NAMESPACE = "mem0"
EVENTS = {"accept": "ADD", "revise": "ADD", "support": "NONE", "contest": "NONE", "resolve": "UPDATE",
          "revoke": "DELETE", "reject": "DELETE", "noop": "NONE"}


def open_db(db: str, token: str | None = None, **settings: Any) -> StoreLike:
    """The store at ``db``: a SQLite file or a ``postgresql://`` URL (``pmem.open``), or the server at an
    ``http(s)://`` URL (``pmem.connect``, with ``token``, else ``$PMEM_TOKEN``)."""
    import pmem

    if db.startswith(("http://", "https://")):
        return pmem.connect(db, token or os.environ.get("PMEM_TOKEN"), **settings)
    return pmem.open(db, **settings)


class _Scoped:
    """A store seen from one namespace, as the ingest path wants it (``namespace``, ``key_edition``,
    ``get_many``, ``apply``)."""

    def __init__(self, store: StoreLike, namespace: str) -> None:
        self.store = store
        self.namespace = namespace
        self.key_edition = getattr(store, "key_edition", KEY_EDITION)

    def get_many(self, keys: Iterable[str]) -> dict[str, CellView]:
        return self.store.get_many(keys, namespace=self.namespace)

    def apply(self, operations: Iterable[Any]) -> list[Receipt]:
        return self.store.apply(operations)


def _texts(messages: str | Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> list[str]:
    """What the user said: a string, or the ``content`` of each message whose role is ``user`` (the
    assistant's turns are not evidence of facts about the user)."""
    if isinstance(messages, str):
        return [messages]
    listed = [messages] if isinstance(messages, Mapping) else list(messages)
    out = []
    for n, m in enumerate(listed, 1):
        if not isinstance(m, Mapping) or not isinstance(m.get("content"), str):
            raise InvalidOperation(f"messages[{n}] must be an object with a string 'content'", field="messages")
        if m.get("role", "user") == "user":
            out.append(m["content"])
    return out


def _llm(llm: Mapping[str, Any]) -> Any:
    """Model settings from ``{"model", "api_base", "timeout_s"}`` or Mem0's ``{"provider", "config":
    {"model", ...}}`` (``openai`` and ``gpt-4o-mini`` make litellm's ``openai/gpt-4o-mini``); else the
    environment's (``$PMEM_LLM_MODEL``, ``$PMEM_LLM_BASE``); None without a model."""
    nested = llm.get("config")
    inner: Mapping[str, Any] = nested if isinstance(nested, Mapping) else llm
    model = inner.get("model")
    if model and llm.get("provider") and "/" not in str(model):
        model = f"{llm['provider']}/{model}"
    settings = llm_settings(model, inner.get("api_base") or inner.get("openai_base_url"))
    if settings is not None and inner.get("timeout_s"):  # a busy shared model server answers slowly
        settings = dataclasses.replace(settings, timeout_s=float(inner["timeout_s"]))
    return settings


def _user(user_id: str | None) -> str:
    if not isinstance(user_id, str) or not user_id.strip():
        raise InvalidOperation("user_id is required: a non-empty string naming whose memories these are",
                               field="user_id")
    return user_id


def _split(memory_id: str) -> tuple[str, str]:
    user, _, key = memory_id.rpartition("/") if isinstance(memory_id, str) else ("", "", "")
    if not user or not key:
        raise InvalidOperation(f"memory_id must be USER/KEY as add and search return it, got {memory_id!r}",
                               field="memory_id")
    return user, key


class Memory:
    """Mem0's ``Memory`` methods over a P-Mem store: ``db`` (a path, a ``postgresql://`` URL, or a
    ``pmem serve`` URL with ``token``) or ``store`` (an open one). ``settings`` go to ``pmem.open``."""

    def __init__(self, db: str | None = None, *, store: StoreLike | None = None, extractor: str = "template",
                 llm: Mapping[str, Any] | None = None, namespace: str = DOOR_NAMESPACE, source: str = "user",
                 token: str | None = None, **settings: Any) -> None:
        if (db is None) == (store is None):
            raise InvalidOperation("give one of db (a path or URL) and store", field="db")
        self._extractor: Extractor = make_extractor(extractor, _llm(llm or {}), "jsonl")  # before opening
        self.store: StoreLike = store if store is not None else open_db(str(db), token, **settings)
        self.namespace = namespace
        self.source = source

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Memory:
        """``{"db": PATH_OR_URL, "extractor": "template"|"llm", "llm": {"model", "api_base"}, ...}``."""
        if not isinstance(config, Mapping) or "db" not in config:
            raise InvalidOperation("config must be a mapping with 'db' (a path or URL)", field="db")
        return cls(**dict(config))

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ------------------------------------------------------------------------------------
    def add(self, messages: str | Mapping[str, Any] | Sequence[Mapping[str, Any]], *, user_id: str | None = None,
            metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Extract facts from what the user said and write them: ``{"results": [{"id", "memory", "event"}]}``
        (``ADD`` a new fact, ``UPDATE`` a new value that superseded one, ``NONE`` nothing new)."""
        user = _user(user_id)
        records = [Record(n, text, source=self.source) for n, text in enumerate(_texts(messages), 1)]
        receipts = [r for r in Ingestor(_Scoped(self.store, user), self._extractor,  # type: ignore[arg-type]
                                        source=self.source).run(records)
                    if r.get("event_index") and not str(r.get("key") or "_").startswith("_")]  # not P-Mem's own
        results = [self._added(user, r) for r in receipts]
        self._remember(user, [r["id"] for r in results if r["event"] in ("ADD", "UPDATE")], metadata)
        return {"results": results}

    def update(self, memory_id: str, data: str) -> dict[str, str]:
        """Give the memory a new value (an ``accept``: the old value is superseded, not lost)."""
        user, key = _split(memory_id)
        if self.store.get(key, namespace=user).status == "empty":
            raise InvalidOperation(f"no memory {memory_id!r}", field="memory_id")
        self.store.apply([{"op": "accept", "key": key, "value": data, "source": self.source, "namespace": user}])
        return {"message": "Memory updated successfully!"}

    def delete(self, memory_id: str) -> dict[str, str]:
        """Revoke every version of the memory; ``history`` still shows them."""
        user, key = _split(memory_id)
        self._revoke(user, [key])
        return {"message": "Memory deleted successfully!"}

    def delete_all(self, *, user_id: str | None = None) -> dict[str, str]:
        user = _user(user_id)
        self._revoke(user, [c.key for c in page_through(self.store, user)])
        return {"message": "Memories deleted successfully!"}

    def reset(self) -> None:
        """Delete the memories of every user this door has written to (revokes: the log keeps them)."""
        for cell in page_through(self.store, self.namespace, after="users"):
            if not cell.key.startswith("users."):
                break
            if cell.value:
                self.delete_all(user_id=cell.value)

    # -- reading ------------------------------------------------------------------------------------
    def search(self, query: str, *, user_id: str | None = None, limit: int = 100) -> dict[str, Any]:
        """The user's memories that best match ``query``, best first, each with its ``score``."""
        user = _user(user_id)
        found = self.store.search(query, limit, namespace=user)
        return {"results": self._shaped(user, [f.cell for f in found], [f.score for f in found])}

    def get_all(self, *, user_id: str | None = None, limit: int = 100) -> dict[str, Any]:
        user = _user(user_id)
        return {"results": self._shaped(user, self.store.frontier(namespace=user, limit=limit))}

    def get(self, memory_id: str) -> dict[str, Any] | None:
        user, key = _split(memory_id)
        cell = self.store.get(key, namespace=user)
        return self._shaped(user, [cell])[0] if cell.status != "empty" else None

    def history(self, memory_id: str) -> list[dict[str, Any]]:
        """P-Mem's versions of the memory, oldest first, in Mem0's history shape plus P-Mem's own fields
        (``status``, ``supersedes``, ``trust``, ``sources``, ``intervals``)."""
        user, key = _split(memory_id)
        return _history(memory_id, self.store.history(key, namespace=user))

    # -- helpers ------------------------------------------------------------------------------------
    def _added(self, user: str, receipt: dict[str, Any]) -> dict[str, Any]:
        memory_id = f"{user}/{receipt['key']}"
        head = receipt.get("head") or {}
        event = EVENTS.get(receipt["op"], "NONE")
        if event == "ADD" and receipt.get("conflict"):
            event = "UPDATE"
        out = {"id": memory_id, "memory": f"{receipt['key']}: {head.get('value')}", "event": event,
               "op": receipt["op"], "event_index": receipt["event_index"]}
        if event == "UPDATE":
            versions = self.store.history(receipt["key"], namespace=user).versions
            before = {v.vid: v.value for v in versions}
            now = next((v for v in versions if receipt["event_index"] in v.evidence), None)
            if now is not None and now.supersedes in before:
                out["previous_memory"] = f"{receipt['key']}: {before[now.supersedes]}"
        return out

    def _remember(self, user: str, ids: list[str], metadata: Mapping[str, Any] | None) -> None:
        """Record the user (for ``reset``) and the metadata of each memory just written."""
        ops = [] if self.store.get(f"users.{label(user)}", namespace=self.namespace).value == user else [
            {"op": "accept", "key": f"users.{label(user)}", "value": user}]
        if metadata:
            blob = json.dumps(dict(metadata), sort_keys=True, ensure_ascii=False)
            ops += [{"op": "accept", "key": _meta_key(i), "value": blob} for i in ids]
        if ops:
            self.store.apply([{**o, "source": self.source, "namespace": self.namespace} for o in ops])

    def _revoke(self, user: str, keys: list[str]) -> None:
        ops = [{"op": "revoke", "key": k, "source": self.source, "namespace": user}
               for k in keys for _ in range(revokes_to_empty(self.store.history(k, namespace=user)))]
        if ops:
            self.store.apply(ops)

    def _shaped(self, user: str, cells: Sequence[CellView], scores: Sequence[float] = ()) -> list[dict[str, Any]]:
        """Mem0's memory objects for ``cells`` (with ``score`` when given)."""
        ids = [f"{user}/{c.key}" for c in cells]
        meta = self.store.get_many([_meta_key(i) for i in ids], namespace=self.namespace) if ids else {}
        out = []
        for n, (cell, memory_id) in enumerate(zip(cells, ids, strict=True)):
            blob = meta.get(_meta_key(memory_id))
            item = {"id": memory_id, "memory": f"{cell.key}: {cell.value}", "user_id": user,
                    "metadata": json.loads(blob.value) if blob is not None and blob.value else None,
                    "status": cell.status, "alternatives": list(cell.alternatives)}
            if n < len(scores):
                item["score"] = scores[n]
            out.append(item)
        return out


def _meta_key(memory_id: str) -> str:
    user, _, key = memory_id.rpartition("/")
    return f"metadata.{label(user)}.{key}"


def _history(memory_id: str, history: History) -> list[dict[str, Any]]:
    values = {v.vid: v.value for v in history.versions}
    return [{"id": f"{memory_id}#{v.vid}", "memory_id": memory_id,
             "old_memory": None if v.supersedes is None else values.get(v.supersedes), "new_memory": v.value,
             "event": "ADD" if v.supersedes is None else "UPDATE", "is_deleted": v.status == "revoked",
             "status": v.status, "supersedes": v.supersedes, "trust": v.trust, "sources": list(v.sources),
             "intervals": [list(i) for i in v.intervals]} for v in history.versions]
