"""The HTTP protocol ``pmem serve`` runs under uvicorn: uvicorn's own, with ``TCP_NODELAY`` set on every
connection and each response's pieces sent together.

- ``TCP_NODELAY``: with ``--workers N`` uvicorn binds the listening socket itself, without naming the
  protocol, and asyncio then leaves Nagle's algorithm on for the connections it accepts: a response
  written in two pieces waits for the client's delayed acknowledgement, about 40 ms a request on Linux.
  A single process listens through asyncio, which sets ``TCP_NODELAY``; this protocol sets it either way.
- One send per response: uvicorn's h11 protocol writes the status line and headers, then the body, as
  separate writes, and asyncio sends each at once: two system calls and two packets a response. The
  writes made in one turn of the event loop are joined and sent at the end of that turn instead; on a
  warm server a ``get`` spends more time in those system calls than in the store (docs/server.md).

Imported only when a server starts (it imports uvicorn); uvicorn's worker processes import it by name.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

try:  # the protocol uvicorn's "auto" would choose: httptools when installed, else h11
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _Base
except ImportError:
    from uvicorn.protocols.http.h11_impl import H11Protocol as _Base  # type: ignore[assignment]


class NoDelayProtocol(_Base):
    """uvicorn's HTTP protocol, answering each response as soon as it is written, in one send."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(JoinedWrites(transport, asyncio.get_running_loop()))  # type: ignore[arg-type]


class JoinedWrites:
    """A transport whose writes within one turn of the event loop go out as one write at its end; every
    other call goes to the transport (closing sends what is pending first, so nothing is reordered or lost)."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport, self._loop = transport, loop
        self._pending: list[bytes] = []

    def write(self, data: bytes) -> None:
        if not data:
            return
        if not self._pending:
            self._loop.call_soon(self.flush)
        self._pending.append(bytes(data))

    def writelines(self, lines: Any) -> None:
        for data in lines:
            self.write(data)

    def flush(self) -> None:
        if self._pending:
            data = b"".join(self._pending)
            self._pending.clear()
            if not self._transport.is_closing():
                self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)
