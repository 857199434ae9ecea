"""``pmem.connect_async``: :mod:`.remote`'s store over ``httpx.AsyncClient``, every method a coroutine
(the local store's methods that the HTTP API does not serve raise :class:`~pmem.domain.errors.NotServed` at once).
It runs the same plans as the sync store."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any, TypeVar, cast

from pmem.adapters.client import plans, wire
from pmem.adapters.client.base import Connection, NotServedApi, connection, load_httpx
from pmem.adapters.client.plans import Plan
from pmem.domain.errors import PmemError, StoreClosed, StoreUnavailable
from pmem.domain.operations import Operation
from pmem.domain.views import CellView, History, Receipt
from pmem.projections.reading import ReadResult
from pmem.projections.vectors import SearchResult

T = TypeVar("T")


class _Driver:
    """The HTTP client and the loop that runs a plan, resending on 503 with ``Retry-After`` (bounded)."""

    _c: Connection
    _http: Any

    def _ns(self, namespace: str | None) -> str | None:
        return self._c.namespace if namespace is None else namespace

    async def _run(self, plan: Plan[T]) -> T:
        if self._http is None:
            raise StoreClosed(f"the remote store {self._c.url} was closed")
        reply: Any = None
        error: PmemError | None = None
        while True:
            try:
                request = plan.send(reply) if error is None else plan.throw(error)
            except StopIteration as done:
                return cast(T, done.value)
            try:
                reply, error = await self._send(request), None
            except PmemError as e:
                reply, error = None, e

    async def _send(self, r: wire.Request) -> Any:
        httpx = load_httpx()
        content = wire.encoded(r.body)
        attempt = 0
        while True:
            try:
                resp = await self._http.request(r.method, r.path, params=r.params, content=content,
                                          headers=wire.JSON if content is not None else None)
            except httpx.TransportError as e:
                raise StoreUnavailable(f"cannot reach the server at {self._c.url}: {e}") from e
            wait = self._c.retries.wait(resp.status_code, resp.headers.get("retry-after"), attempt)
            if wait is None:
                return wire.answer_of(resp.status_code, resp.content)
            attempt += 1
            await asyncio.sleep(wait)


class _Writes(_Driver):
    """The typed operations; each returns its receipt (docs/python-api.md, "Writing")."""

    async def apply(self, operations: Iterable[Operation | Mapping[str, Any]]) -> list[Receipt]:
        return await self._run(plans.apply(operations, self._ns(None)))

    async def accept(self, key: str, value: str, **evidence: Any) -> Receipt:
        return await self._run(plans.one("accept", key, value, self._ns(None), evidence))

    async def contest(self, key: str, value: str, **evidence: Any) -> Receipt:
        return await self._run(plans.one("contest", key, value, self._ns(None), evidence))

    async def reject(self, key: str, value: str | None = None, **evidence: Any) -> Receipt:
        return await self._run(plans.one("reject", key, value, self._ns(None), evidence))

    async def revoke(self, key: str, value: str | None = None, **evidence: Any) -> Receipt:
        return await self._run(plans.one("revoke", key, value, self._ns(None), evidence))

    async def resolve(self, key: str, value: str, **evidence: Any) -> Receipt:
        return await self._run(plans.one("resolve", key, value, self._ns(None), evidence))

    async def support(self, key: str, value: str | None = None, **evidence: Any) -> Receipt:
        return await self._run(plans.one("support", key, value, self._ns(None), evidence))

    async def revise(self, key: str, new_value: str, *, old_value: str | None = None, status: str = "update",
               hard_commit: bool = False, **evidence: Any) -> Receipt:
        fields = {"old_value": old_value, "status": status, "hard_commit": hard_commit or None, **evidence}
        return await self._run(plans.one("revise", key, new_value, self._ns(None), fields))

    async def declare_prerequisite(self, before: str, after: str, **evidence: Any) -> Receipt:
        return await self._run(plans.declare_prerequisite(before, after, self._ns(None), evidence))


class _Reads(_Driver):
    """What the memory holds, now or as of an event index (docs/python-api.md, "Reading")."""

    async def get(self, key: str, *, as_of: int | None = None, disclose: Iterable[str] = (),
            namespace: str | None = None) -> CellView:
        return await self._run(plans.get(key, as_of, disclose, self._ns(namespace)))

    async def get_many(self, keys: Iterable[str], *, namespace: str | None = None) -> dict[str, CellView]:
        return await self._run(plans.get_many(keys, self._ns(namespace)))

    async def frontier(self, *, as_of: int | None = None, disclose: Iterable[str] = (), namespace: str | None = None,
                 system: bool = False, after: str | None = None, limit: int | None = None) -> list[CellView]:
        return await self._run(plans.frontier(as_of, disclose, self._ns(namespace), system, after, limit, self._c.page))

    async def history(self, key: str, *, as_of: int | None = None, namespace: str | None = None) -> History:
        return await self._run(plans.history(key, as_of, self._ns(namespace)))

    async def log(self, *, after: int = 0, limit: int | None = None, namespace: str | None = None,
            as_of: int | None = None) -> list[dict[str, Any]]:
        return await self._run(plans.log(after, limit, self._ns(namespace), as_of, self._c.page))

    async def last_index(self) -> int:
        return await self._run(plans.last_index(self._ns(None)))

    async def stats(self) -> dict[str, Any]:
        return await self._run(plans.stats(self._ns(None)))

    async def search(self, query: str, k: int = 12, *, as_of: int | None = None, namespace: str | None = None,
               system: bool = False, ranking: str = "hybrid") -> list[SearchResult]:
        return await self._run(plans.search(query, k, as_of, self._ns(namespace), system, ranking))

    async def read(self, question: str, *, mode: str = "cells", k: int = 12, budget: int | None = None,
             disclose: Iterable[str] = (), as_of: int | None = None, namespace: str | None = None,
             system: bool = False, alternatives: str = "summary", min_trust: int | None = None, hops: int = 0,
             iterative: bool = False, dated: bool = False) -> ReadResult:
        args = {"mode": mode, "k": k, "budget": budget, "disclose": disclose, "as_of": as_of, "system": system,
                "alternatives": alternatives, "min_trust": min_trust, "hops": hops, "iterative": iterative,
                "dated": dated}
        return await self._run(plans.read(question, self._ns(namespace), args))

    async def what_next(self, k: int = 5, *, previous: str | None = None, as_of: int | None = None,
                  namespace: str | None = None, system: bool = False) -> list[dict[str, Any]]:
        return await self._run(plans.what_next(k, previous, as_of, self._ns(namespace), system))


class AsyncRemoteStore(_Writes, _Reads, NotServedApi):
    """The async form of :class:`.remote.RemoteStore`: a store served by ``pmem serve`` at ``url``, used as
    ``token``'s credential allows (docs/integrations.md).

    ``namespace``: the one every call uses unless given its own (None: the credential's first);
    ``retries``: resends of a request answered 503 with ``Retry-After``; ``page``: cells or events per
    request of ``frontier`` and ``log`` (at most the server's ``--max-limit``)."""

    def __init__(self, url: str, token: str | None = None, *, namespace: str | None = None, timeout: float = 30.0,
                 retries: int = 3, page: int = 1000) -> None:
        self._c = connection(url, token, namespace, timeout, retries, page)
        self._http = load_httpx().AsyncClient(base_url=self._c.url, headers=self._c.headers, timeout=self._c.timeout_s)

    @property
    def namespace(self) -> str | None:
        return self._c.namespace

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def __aenter__(self) -> AsyncRemoteStore:
        return self

    async def __aexit__(self, t: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()


def connect_async(url: str, token: str | None = None, *, namespace: str | None = None, timeout: float = 30.0,
                  retries: int = 3, page: int = 1000) -> AsyncRemoteStore:
    """:func:`.remote.connect`'s store with coroutine methods: ``async with pmem.connect_async(...) as s``."""
    return AsyncRemoteStore(url, token, namespace=namespace, timeout=timeout, retries=retries, page=page)
