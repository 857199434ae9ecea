"""One error tree for P-Mem. Every error a caller can see derives from :class:`PmemError`.

    PmemError
    ├── InvalidOperation        bad input: a field is missing, empty, of the wrong type or too large
    │   ├── InvalidBatch        one line of a batch is bad; names the line, nothing was written
    │   └── LimitExceeded       a server request over one of its limits (``status`` 413 or 422); nothing done
    ├── StoreError              the store cannot do what was asked (adapters translate library errors)
    │   ├── StoreUnavailable    the database cannot be opened, read or written
    │   ├── StoreClosed         the store was closed: nothing can be read or written through it any more
    │   ├── DeadlinePassed      a server request ran past its deadline: nothing written, resend it
    │   ├── ConflictRetriesExhausted  concurrent writers kept winning; nothing from this call was written
    │   ├── RetryConflict       an op_id resent with a different operation; nothing from this call was written
    │   ├── WorkerAlreadyRunning  a projection already has a live worker process
    │   ├── EmbedderUnavailable the embedding model cannot be found, verified, loaded or reached
    │   │   └── EmbedderBadResponse  an embedding server answered with something that is not the vectors asked for
    │   ├── JudgeUnavailable    the configured conflict judge (an LLM server) did not answer usably
    │   └── ProjectionStopped   a projection met an event it cannot apply; names its index and why
    ├── UnknownProjection       a projection name that does not exist
    ├── ExtractorNotConfigured  an extractor was asked for that this installation cannot run
    ├── ReaderNotConfigured     the LLM reader was asked for but no model server is configured
    ├── Unauthorized            a server request without a valid token (missing, unknown or revoked)
    ├── Forbidden               a credential does not allow this: another namespace, or a write when read-only
    ├── NotServed               a method of the local store that a remote store cannot serve over HTTP
    └── MissingExtra            an optional part (a pip extra such as ``llm``) is not installed

Each error carries a one-line message that says what was wrong and where.
"""

from __future__ import annotations


class PmemError(Exception):
    """Root of every error P-Mem raises on purpose."""

    kind = "error"


class InvalidOperation(PmemError, ValueError):
    """An operation was rejected before anything was written."""

    kind = "invalid operation"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class InvalidBatch(InvalidOperation):
    """A line of a batch is invalid; the whole batch was rejected and nothing was written."""

    kind = "invalid batch"

    def __init__(self, message: str, *, line: int, field: str | None = None) -> None:
        super().__init__(f"line {line}: {message}", field=field)
        self.line = line


class LimitExceeded(InvalidOperation):
    """A server request asked for more than one of its limits allows (docs/server.md); nothing was done.
    ``status`` is the HTTP status it is answered with: 413 for a body or batch, 422 for the rest."""

    kind = "limit exceeded"

    def __init__(self, message: str, status: int, field: str) -> None:
        super().__init__(message, field=field)
        self.status = status


class StoreError(PmemError):
    """The store could not complete the request."""

    kind = "store error"


class StoreUnavailable(StoreError):
    """The database cannot be opened, read or written."""

    kind = "store unavailable"


class StoreClosed(StoreError):
    """The store was closed (``close()``, or the end of its ``with`` block); open it again to use it."""

    kind = "store closed"


class DeadlinePassed(StoreUnavailable):
    """A server request ran past the server's deadline: a write was not committed, a read was not answered."""

    kind = "deadline passed"


class TryAgain(StoreUnavailable):
    """A server could not answer now, and the same request may be sent again (a 503 with Retry-After)."""

    kind = "try again"


class ConflictRetriesExhausted(StoreError):
    """Other writers kept changing the same cells; nothing from this call was written."""

    kind = "conflict"


class RetryConflict(StoreError):
    """An ``op_id`` was resent with a different operation (another key or op) than the one recorded under it."""

    kind = "conflict"


class WorkerAlreadyRunning(StoreError):
    """A projection already has a live worker process; a second one would only contend for it."""

    kind = "worker already running"


class EmbedderUnavailable(StoreError):
    """The embedding model or its tokenizer cannot be found, verified or loaded, or its server reached."""

    kind = "embedder unavailable"


class EmbedderBadResponse(EmbedderUnavailable):
    """An embedding server answered, but not with one vector of the expected dimension per text."""

    kind = "embedder bad response"


class UnknownProjection(PmemError, ValueError):
    """No projection has that name."""

    kind = "unknown projection"


class ExtractorNotConfigured(PmemError):
    """The requested extractor (e.g. ``llm``) is not set up on this installation."""

    kind = "extractor not configured"


class JudgeUnavailable(StoreError):
    """The configured conflict judge (an LLM server) did not answer usably."""

    kind = "judge unavailable"
class ReaderNotConfigured(PmemError):
    """The optional LLM reader was asked for but no model server is configured (``PMEM_LLM_BASE``)."""

    kind = "reader not configured"


class Unauthorized(PmemError):
    """A request to a server (``pmem serve``, ``pmem mcp``) carried no token, an unknown one or a revoked one."""

    kind = "unauthorized"


class Forbidden(PmemError):
    """The request's credential does not allow it: a namespace outside it, or a write with a read-only one."""

    kind = "forbidden"


class NotServed(PmemError, NotImplementedError):
    """A method of the local store that the HTTP API does not serve (erasure, maintenance, the graph), called
    on a remote store (``pmem.connect``)."""

    kind = "not served"

    def __init__(self, method: str) -> None:
        super().__init__(f"{method} is not served over HTTP: call it where the store is (pmem.open, or its "
                         "pmem command)")
        self.method = method


class MissingExtra(PmemError, ImportError):
    """An optional part of P-Mem was asked for, but the pip extra that provides it is not installed.

    A setup problem, not bad input: the CLI exits 1, as for the other "not configured" errors. It is
    also an :class:`ImportError`, so code that probes for an optional library still catches it.
    """

    kind = "missing extra"

    def __init__(self, module: str, extra: str) -> None:
        super().__init__(f"{module} is not installed: pip install 'pmem[{extra}]'", name=module)
        self.module = module
        self.extra = extra

    def __reduce__(self) -> tuple[type[MissingExtra], tuple[str, str]]:  # picklable across worker processes
        return (type(self), (self.module, self.extra))


class ProjectionStopped(StoreError):
    """A projection met an event it cannot apply (from a newer release, or damaged) and stopped there
    for that event's namespace; the message names the event index and the reason."""

    kind = "projection stopped"
