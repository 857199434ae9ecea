"""What the sync and the async remote store share: the connection settings, httpx (loaded on first use,
with the hint naming the extra), and the local store's methods that the HTTP API does not serve."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NoReturn

from pmem.adapters.client.wire import Retries
from pmem.domain.errors import InvalidOperation, MissingExtra, NotServed
from pmem.domain.operations import checked_count, checked_namespace, checked_string


def load_httpx() -> Any:
    """The ``httpx`` module, or the one-line hint naming the extra that installs it."""
    try:
        import httpx
    except ImportError:
        raise MissingExtra("httpx", "server") from None
    return httpx


@dataclass(frozen=True)
class Connection:
    """Where a remote store sends its requests, as whom, and how patiently."""

    url: str
    headers: dict[str, str]
    namespace: str | None  # None: the credential's first namespace
    timeout_s: float
    retries: Retries
    page: int  # cells or events asked for per request by frontier() and log()


def connection(url: str, token: str | None, namespace: str | None, timeout: float, retries: int,
               page: int) -> Connection:
    """The settings of :func:`pmem.connect`, each checked before any request."""
    url = checked_string(url, "url").rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise InvalidOperation(f"url must start with http:// or https://, got {url[:60]!r}", field="url")
    headers = {} if token is None else {"Authorization": f"Bearer {checked_string(token, 'token')}"}
    if namespace is not None:
        namespace = checked_namespace(namespace)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise InvalidOperation(f"timeout must be a positive number of seconds, got {timeout!r}", field="timeout")
    return Connection(url, headers, namespace, float(timeout),
                      Retries(checked_count(retries, "retries", "a non-negative number of resends")),
                      checked_count(page, "page", "a positive page size", minimum=1))


class NotServedApi:
    """The local store's methods the HTTP API does not serve: each raises :class:`NotServed` naming it."""

    def forget(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise NotServed("forget")

    def apply_stream(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise NotServed("apply_stream")

    def graph(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise NotServed("graph")

    def graph_facts(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise NotServed("graph_facts")

    def graph_around(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise NotServed("graph_around")

    def catch_up(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise NotServed("catch_up")

    def rebuild(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise NotServed("rebuild")

    def rebuild_vectors(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise NotServed("rebuild_vectors")

    def migrate_keys(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise NotServed("migrate_keys")

    def doctor(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise NotServed("doctor")
