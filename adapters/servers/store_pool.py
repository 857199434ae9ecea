"""The stores one server process lends to its requests: each request has a store (and so a database
connection: a SQLite WAL reader, or a PostgreSQL connection) of its own while it runs, so reads run in
parallel and no lock is held across a request's work. Writes are serialized where the log needs them, by
the log itself (its write lock, the same one that orders several server processes).

Stores are opened as they are first needed, up to the pool's size, and lent last-returned first, so a
process answering one request at a time keeps using one warm store. They share one lock per projection:
when a read must fold events, one store folds them while the others wait for them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, cast

from pmem.adapters.servers.limits import Deadline, DeadlinePassed
from pmem.adapters.service.credentials import Credentials
from pmem.adapters.service.searching import ScorerSlot
from pmem.adapters.service.store import Store
from pmem.domain.operations import Operation
from pmem.domain.views import Receipt


class ServedStore(Store):
    """A store lent to one request at a time: its credentials, and its request's deadline, which a write
    batch checks last, inside its transaction, so a batch past the deadline is rolled back whole, and a
    read between its stages (each catch-up batch, a search's ranking and reading), so it stops soon
    after its 503."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.credentials = Credentials(self.projection_db)
        self._deadline: Deadline | None = None
        self._no_deadline = self._w.until

    def share_folding(self, fold_locks: dict[str, threading.Lock], scoring: ScorerSlot) -> None:
        """Fold each projection under the lock ``fold_locks`` holds for it (the first store gives its own),
        and keep ``next``'s scores current with the worker of ``scoring`` (one per process)."""
        for name, projection in self.projections.items():
            projection.fold_lock = fold_locks.setdefault(name, projection.fold_lock)
        self._searches.scoring = scoring

    @property
    def waiting(self) -> Callable[[], AbstractContextManager[Any]]:
        """What a read waiting for other work runs its wait in (:class:`StorePool` lends its turn out)."""
        return self._w.waiting

    @waiting.setter
    def waiting(self, waiting: Callable[[], AbstractContextManager[Any]]) -> None:
        self._w.waiting = waiting

    @property
    def has_vectors(self) -> bool:
        """Whether this store has loaded its vector index (a search did)."""
        return self._w.vectors is not None

    @property
    def lock(self) -> Any:
        """The lock this store's reads and writes hold while they run (one thread at a time)."""
        return self._w.lock

    @property
    def deadline(self) -> Deadline | None:
        return self._deadline

    @deadline.setter
    def deadline(self, deadline: Deadline | None) -> None:
        self._deadline = deadline
        self._w.until = self._no_deadline if deadline is None else deadline

    def apply(self, operations: Iterable[Operation | Mapping[str, Any]]) -> list[Receipt]:
        deadline = self.deadline
        ops = list(operations)
        if deadline is None or not ops or not all(isinstance(op, Operation) for op in ops):
            return super().apply(ops)
        deadline.check("nothing was written")
        receipts: list[Receipt] = []

        def chunks() -> Iterator[list[Operation]]:
            yield cast(list[Operation], ops)  # all Operations: checked above
            deadline.check("nothing was written")  # raised here, the whole batch is rolled back

        self.apply_stream(chunks(), receipts.extend)
        return receipts


class StorePool:
    """Up to ``size`` stores made by ``open_store``, each lent to one request at a time. Writes and heavy
    reads (search, read, ``next``...) never take the last store, so a point read (a cell, its history:
    ``lend(point=True)``) never queues behind them, and heavy reads hold at most ``heavy`` stores at once.

    Why one heavy read at a time by default: a process's GIL runs one thread's Python at a time, so two
    CPU-bound searches side by side take as long as one after the other, and each thread running Python
    makes every ``get`` wait longer for its turn (docs/server.md, "Processes, workers"). Writes are not
    held to it: they mostly wait for the log's write lock, with the GIL released."""

    def __init__(self, open_store: Callable[[], ServedStore], size: int, heavy: int = 1) -> None:
        self._open_store, self.size = open_store, size
        self.others_max = size - 1 if size >= 2 else size  # stores lent at once to writes and heavy reads
        self.heavy_max = min(heavy, self.others_max)  # ... and of those, to heavy reads
        self._others = self._heavy = 0
        self.fold_locks: dict[str, threading.Lock] = {}  # one per projection, shared by the pool's stores
        # and one score worker, on a store of its own, scoring in a child process: the GIL stays with requests
        self.scoring = ScorerSlot(self._score_worker, apart=True)
        self._scoring_store: ServedStore | None = None
        self._idle: list[ServedStore] = []
        self._all: list[ServedStore | _Opening] = []
        self._ready = threading.Condition()

    def start(self) -> ServedStore:
        """Open the first store (so a store that cannot be opened stops the server at its start)."""
        with self.lend(Deadline(60)) as store:
            return store

    @contextmanager
    def lend(self, deadline: Deadline, *, point: bool = False, write: bool = False) -> Iterator[ServedStore]:
        """A store for one request, waiting at most until ``deadline`` for one to be free; ``point``: a
        point read, which may take the store the others leave; ``write``: a write, not held to ``heavy``."""
        kind = "point" if point else "write" if write else "heavy"
        store = self._take(deadline, kind)
        store.deadline = deadline
        if kind == "heavy":
            store.waiting = lambda: self._turn_lent(deadline)
        try:
            yield store
        finally:
            store.deadline = None
            store.waiting = nullcontext
            with self._ready:
                self._idle.append(store)
                self._count(kind, -1)
                self._ready.notify_all()  # (the waiters differ in what they may take)

    @contextmanager
    def _turn_lent(self, deadline: Deadline) -> Iterator[None]:
        """A heavy read's turn lent out while it waits for work elsewhere (``next`` for its scores), and
        taken back after, within its ``deadline``."""
        with self._ready:
            self._heavy -= 1
            self._ready.notify_all()
        try:
            yield
        finally:
            with self._ready:
                while self._heavy >= self.heavy_max:
                    if not self._ready.wait(deadline.left()) and self._heavy >= self.heavy_max:
                        self._heavy += 1  # lend() gives it back: the count stays whole
                        raise DeadlinePassed(self._busy("heavy", deadline))
                self._heavy += 1

    def _count(self, kind: str, n: int) -> None:
        self._others += n * (kind != "point")
        self._heavy += n * (kind == "heavy")

    def _may_take(self, kind: str) -> bool:
        free = bool(self._idle) or len(self._all) < self.size
        return free and (kind == "point" or self._others < self.others_max
                         and (kind == "write" or self._heavy < self.heavy_max))

    def _busy(self, kind: str, deadline: Deadline) -> str:
        waited = f"within the deadline of {deadline.seconds:g} s (--deadline)"
        if kind == "heavy" and self._heavy >= self.heavy_max:
            return f"no turn was free {waited} ({self.heavy_max} searches, reads and the like at once; --heavy)"
        return f"no connection was free {waited} (all {self.size} busy; --connections)"

    def _pop(self, kind: str) -> ServedStore:
        """The idle store a request of ``kind`` takes: the last returned of those whose vector index is
        loaded as the request needs it (loaded for a heavy read, not for the rest), else the last
        returned. So only about ``heavy`` stores ever load the index, each a copy of every vector, and
        theirs stays warm (loading it at 500,000 cells took 1.6 s, holding the GIL)."""
        want = kind == "heavy"
        for i in range(len(self._idle) - 1, -1, -1):
            if self._idle[i].has_vectors == want:
                return self._idle.pop(i)
        return self._idle.pop()

    def _take(self, deadline: Deadline, kind: str) -> ServedStore:
        with self._ready:
            while not self._may_take(kind):
                if not self._ready.wait(deadline.left()) and not self._may_take(kind):
                    raise DeadlinePassed(self._busy(kind, deadline))
            self._count(kind, 1)
            if self._idle:
                return self._pop(kind)
            self._all.append(placeholder := _Opening())
        try:
            store = self.open_shared()
        except BaseException:
            with self._ready:
                self._all.remove(placeholder)
                self._count(kind, -1)
                self._ready.notify_all()
            raise
        with self._ready:
            self._all[self._all.index(placeholder)] = store
        return store

    def open_shared(self) -> ServedStore:
        """A store that folds each projection under the lock the pool's other stores use for it (so one
        folds while the others wait: ``TrackedProjection.catch_up_for``); the pool does not count it
        unless it lends it."""
        store = self._open_store()
        store.share_folding(self.fold_locks, self.scoring)
        return store

    def _score_worker(self) -> tuple[Any, Any]:
        """Where the process's score worker runs: the graph projection and lock of a store never lent to
        a request, so no request waits behind its rounds for the lock of the store it was lent."""
        store = self._scoring_store = self.open_shared()
        return store.projections["graph"], store.lock

    def close(self) -> None:
        with self.scoring.lock:
            worker, self.scoring.worker = self.scoring.worker, None
        if worker is not None:
            worker.close()
        if self._scoring_store is not None:
            with self._scoring_store.lock:  # a round in progress lets go; the next sees it is closed
                pass
            self._scoring_store.close()
        with self._ready:
            stores, self._all, self._idle = self._all, [], []
        for store in stores:
            if isinstance(store, ServedStore):
                store.close()


class _Opening:
    """Holds a store's place in the pool while it opens (outside the pool's lock)."""
