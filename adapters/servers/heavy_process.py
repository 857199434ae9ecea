"""Heavy reads answered by a process of their own beside a ``pmem serve`` process (docs/server.md, "Heavy
reads apart").

Why: a process's GIL runs one thread's Python at a time. A search, a read or ``next`` runs Python for tens
to hundreds of milliseconds, and every ``get`` the same process answers meanwhile waits for its turns at the
GIL. With those reads in a second process, a ``get`` waits only for the other light requests
(docs/benchmarks.md, "50 tenants").

So a server process (the front) starts one child, the heavy process: the same app over the same store,
answering on a Unix socket in a folder only this user may open, without the thread that keeps the
projections current (the front's keeps them; a read in the child folds what its namespace lacks, as any
read does). The front forwards each request for a heavy route (:func:`is_heavy`) whole (method, path,
query, headers, body: :mod:`.asgi_frames`, no HTTP in between) and sends back the child's answer. The
child authenticates the same bearer token against the same credentials and holds the request to the
same limits and deadline, so the answer is the one the front would have given; the front adds nothing
and trusts nothing of its own. The child runs at a lower scheduling priority (:data:`NICE`).

A request that finds the child still starting waits for it within the deadline. A child that died is
started again; a request it was answering gets a 503 with ``Retry-After`` (a read: nothing to undo). The
child exits when its parent does, even a parent killed with SIGKILL (it watches its parent's pid).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from pmem.adapters.servers.asgi_frames import answer_frames, frame, read_frame, request_head
from pmem.adapters.servers.http_runtime import error_response
from pmem.adapters.servers.limits import Deadline, DeadlinePassed, Limits
from pmem.domain.errors import TryAgain

HEAVY_ROUTES = frozenset({"/v1/search", "/v1/read", "/v1/next", "/v1/graph", "/v1/frontier", "/v1/log"})
HEAVY_PREFIX = "/v1/inspect/"  # the inspector's reads: pages of the frontier, neighbourhoods, next
WATCH_S = 0.5  # how often the child looks whether its parent is still there
STOP_S = 10.0  # how long a child is given to finish its requests when the front stops
RETRY_S = 0.05  # the wait between two tries to reach a child that is starting
EXIT_S = 1.0  # how long a child that dropped a connection is given to be gone before it counts as alive
GRACE_S = 1.0  # past the deadline, how long the front waits for the child's own 503 before answering one
IDLE_MAX = 32  # connections to the child kept open between requests
# The child's scheduling priority below the front's: where the cores are busy, a cell's read and a write
# get the CPU before a search, which takes a hundred times as long anyway (docs/server.md). Not lower:
# at 10, four busy processes beside the server left the child a fortieth of a core, and the inspector's
# first `next` (a score worker started and run) past half a minute; at 5, `get` p99 was the same.
NICE = 5


def is_heavy(scope: dict[str, Any]) -> bool:
    """Whether an HTTP request is one the heavy process answers: searches, reads and the other reads of
    many cells (a cell, its history, writes and ``/healthz`` stay with the front)."""
    if scope["type"] != "http":  # (lifespan and websocket scopes have no path to forward)
        return False
    path: str = scope["path"]
    return path in HEAVY_ROUTES or path.startswith(HEAVY_PREFIX)


class HeavyProcess:
    """The heavy process of one front: started with :meth:`start`, started again by :meth:`forward`
    when it died, stopped with :meth:`stop`."""

    def __init__(self, main: Callable[..., None], db: str, *, insecure_local: bool, limits: Limits) -> None:
        """``main``: the child's, called with the store, ``insecure_local``, the limits (as
        :meth:`.Limits.to_env`), the socket and the front's pid; it builds the app and calls :func:`run`."""
        self.main, self.db, self.insecure_local, self.limits = main, db, insecure_local, limits
        self._folder = tempfile.mkdtemp(prefix="pmem-heavy-")  # 0700: only this user reaches the socket
        self.socket = os.path.join(self._folder, "heavy.sock")
        self._process: Any = None
        self._idle: list[_Connection] = []
        self._restart = asyncio.Lock()
        self.started = 0  # children started, the first included

    def start(self) -> None:
        if os.path.exists(self.socket):
            os.unlink(self.socket)  # a dead child's: the new one binds its own
        ctx = multiprocessing.get_context("spawn")  # a fresh interpreter: the front's threads are not copied
        self._process = ctx.Process(target=self.main, name="pmem-heavy", args=(
            self.db, self.insecure_local, self.limits.to_env(), self.socket, os.getpid()))
        self._process.start()
        self.started += 1

    def alive(self) -> bool:
        return self._process is not None and self._process.is_alive()

    async def stop(self) -> None:
        for connection in self._idle:
            connection.writer.close()
        self._idle.clear()
        if self._process is not None:
            self._process.terminate()  # it finishes the requests it is answering, then exits
            await asyncio.to_thread(self._process.join, STOP_S)
            if self._process.is_alive():
                self._process.kill()
                self._process.join()
        shutil.rmtree(self._folder, ignore_errors=True)

    async def forward(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Answer one heavy request with the heavy process's answer to it (see the module)."""
        deadline = Deadline(self.limits.deadline_s)
        request = frame(request_head(scope), await _body(receive))
        try:
            head, body = await asyncio.wait_for(self._exchange(request, deadline), deadline.left() + GRACE_S)
        except TimeoutError:
            response = error_response(DeadlinePassed(
                f"the request ran past the deadline of {deadline.seconds:g} s (--deadline)"))
            await response(scope, receive, send)
            return
        except TryAgain as e:
            await error_response(e)(scope, receive, send)
            return
        await send({"type": "http.response.start", "status": head["status"],
                    "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in head["headers"]]})
        await send({"type": "http.response.body", "body": body})

    async def _exchange(self, request: bytes, deadline: Deadline) -> tuple[dict[str, Any], bytes]:
        """The child's answer to ``request``. A connection the child dropped before answering is tried
        again: an idle one it had closed (a child started since), then once a new child (the one that had
        the request died with it: a read, so sending it again undoes nothing)."""
        lost = 0
        while True:
            connection, reused = await self._connection(deadline)
            try:
                connection.writer.write(request)
                await connection.writer.drain()
                answer = await read_frame(connection.reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                connection.writer.close()
                if reused:
                    continue
                await self._revive()
                lost += 1
                if lost > 1:
                    raise TryAgain("the heavy-read process stopped while answering; it was started again") from None
                continue
            except BaseException:  # past the deadline (cancelled): its answer would come on a closed connection
                connection.writer.close()
                raise
            if connection.generation == self.started and len(self._idle) < IDLE_MAX:
                self._idle.append(connection)
            else:
                connection.writer.close()
            return answer

    async def _connection(self, deadline: Deadline) -> tuple[_Connection, bool]:
        """An idle connection to the child (True), or a new one (False), once it listens."""
        while self._idle:
            connection = self._idle.pop()
            if connection.generation == self.started and not connection.reader.at_eof():
                return connection, True
            connection.writer.close()
        while True:
            try:
                reader, writer = await asyncio.open_unix_connection(self.socket)
                return _Connection(reader, writer, self.started), False
            except (FileNotFoundError, ConnectionRefusedError):  # not listening yet, or gone
                if deadline.left() <= 0:
                    raise TryAgain("the heavy-read process did not start within the deadline") from None
                if not self.alive():  # (one still starting is waited for)
                    await self._revive()
                await asyncio.sleep(RETRY_S)

    async def _revive(self) -> None:
        """Start the child again if it died (once, however many requests found it dead). A child that
        dropped a connection may still be exiting: it is given :data:`EXIT_S` to be gone."""
        async with self._restart:
            if self._process is not None:
                await asyncio.to_thread(self._process.join, EXIT_S)
            if not self.alive():
                self.start()


class _Connection(NamedTuple):
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    generation: int  # the child it reaches (:attr:`HeavyProcess.started` when it was opened)


class ForwardHeavy:
    """ASGI middleware: heavy requests (:func:`is_heavy`) answered by the heavy process."""

    def __init__(self, app: Any, heavy: HeavyProcess) -> None:
        self.app, self.heavy = app, heavy

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if is_heavy(scope):
            await self.heavy.forward(scope, receive, send)
        else:
            await self.app(scope, receive, send)


async def _body(receive: Any) -> bytes:
    """The whole request body (its size is already held to the limit by the outer ``BodyLimit``)."""
    parts: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(parts)
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(parts)


def run(make_app: Callable[[], Any], socket: str, parent: int) -> None:
    """The heavy process: the app ``make_app`` builds, answering frames on the Unix socket ``socket``
    until SIGTERM or SIGINT, or until the process ``parent`` is gone."""
    threading.Thread(target=_exit_without, args=(parent,), name="pmem-parent-watch", daemon=True).start()
    os.nice(NICE)
    asyncio.run(_serve(make_app(), socket))


async def _serve(app: Any, socket: str) -> None:
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    answering: set[asyncio.Task[None]] = set()

    async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        answering.add(task)
        try:
            await answer_frames(app, reader, writer)
        finally:
            answering.discard(task)

    async with app.router.lifespan_context(app):
        server = await asyncio.start_unix_server(connected, path=socket)
        await stopping.wait()
        server.close()
        if answering:  # the requests being answered finish (each waits for its next one no longer)
            await asyncio.wait(answering, timeout=STOP_S)


def _exit_without(parent: int) -> None:
    """Once the front is gone (nobody can reach this process's socket any more), stop as on SIGTERM, so
    that the score worker's processes stop with this one; at once if that takes past :data:`STOP_S`."""
    while os.getppid() == parent:
        time.sleep(WATCH_S)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(STOP_S)
    os._exit(1)
