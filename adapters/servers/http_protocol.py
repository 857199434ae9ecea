"""The HTTP protocol ``pmem serve`` runs under uvicorn: uvicorn's own, with ``TCP_NODELAY`` set on every
connection.

With ``--workers N`` uvicorn binds the listening socket itself, without naming the protocol, and asyncio
then leaves Nagle's algorithm on for the connections it accepts: a response written in two pieces
waits for the client's delayed acknowledgement, about 40 ms a request on Linux. A single process
listens through asyncio, which sets ``TCP_NODELAY``; this protocol sets it either way. Imported only
when a server starts (it imports uvicorn); uvicorn's worker processes import it by name.
"""

from __future__ import annotations

import asyncio
import socket

try:  # the protocol uvicorn's "auto" would choose: httptools when installed, else h11
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _Base
except ImportError:
    from uvicorn.protocols.http.h11_impl import H11Protocol as _Base  # type: ignore[assignment]


class NoDelayProtocol(_Base):
    """uvicorn's HTTP protocol, answering each response as soon as it is written."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(transport)
