"""The composition root of storage: which backend a ``--db`` value (or ``PMEM_DB``) selects.

    mem.db, /path/to/mem.db, :memory:          SQLite (the embedded default)
    postgresql://user[:password]@host[:port]/dbname[?schema=NAME]     PostgreSQL

Everything that differs between the two is decided here, once: the eventsourcing persistence module
and its settings for the log, the connection the projections write to, where the local caches live
(the FAISS index file and the embedding cache), and two capabilities:

- ``lazy_log``: the store may read the log's head and rows with plain SQL and open the event log
  (``eventsourcing``) only when something needs events (:mod:`pmem.adapters.eventstore.stored_log`). A SQLite file:
  yes (read commands then start without importing eventsourcing); memory and PostgreSQL: no, the
  store opens the log at once.
- ``fast_rebuild``: a full rebuild of the frontier folds the log cell by cell into shadow tables and
  swaps them in (:meth:`pmem.adapters.readmodels.sqlite_projection.FrontierProjection.rebuild`). SQLite: yes;
  PostgreSQL: no, it replays from index 0 by the incremental path (a renamed table keeps its
  primary-key index name there, so a second shadow table would collide with it). The projection
  database the backend connects carries the flag.

The rest of P-Mem sees a :class:`Backend`.

Local caches of a PostgreSQL store live under ``$PMEM_CACHE_DIR`` (default
``$XDG_CACHE_HOME/pmem`` or ``~/.cache/pmem``), in a folder named after the database and a hash of
host, port, database and schema: ``<dbname>-<12 hex>/``. They are disposable (rebuilt from the
database when missing or stale), so each machine that searches a shared server keeps its own.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from pmem.domain.errors import InvalidOperation, StoreUnavailable

INSTALL_HINT = "PostgreSQL support is not installed: pip install 'pmem[postgres]' (psycopg 3 and its pool)"
SCHEMES = ("postgresql", "postgres")


def is_url(db: str | Path) -> bool:
    return isinstance(db, str) and db.split("://", 1)[0] in SCHEMES and "://" in db


def open_backend(db: str | Path) -> SqliteBackend | PgBackend:
    """The backend ``db`` names: a PostgreSQL URL, else a SQLite path (or ``:memory:``)."""
    return PgBackend.from_url(str(db)) if is_url(db) else SqliteBackend.from_path(db)


@dataclass(frozen=True)
class SqliteBackend:
    """One SQLite file holds the log, the projections and the embedding cache; the FAISS index
    sits next to it. ``:memory:`` keeps everything in memory."""

    db: str  # the SQLite database name eventsourcing opens (a file, or a shared-cache memory URI)
    label: str  # what error messages name
    path: Path | None  # the file, None in memory
    fast_rebuild = True

    @classmethod
    def from_path(cls, path: str | Path) -> SqliteBackend:
        if str(path) == ":memory:":
            return cls(f"file:pmem-{uuid.uuid4().hex}?mode=memory&cache=shared", ":memory:", None)
        db = str(path)
        why = _unopenable(Path(db).expanduser())
        if why is not None:
            raise StoreUnavailable(f"cannot open store {db}: {why}")
        return cls(db, db, Path(db))

    @property
    def errors(self) -> tuple[type[BaseException], ...]:
        return (sqlite3.Error,)

    @property
    def lazy_log(self) -> bool:
        """A file store reads the log with plain SQL on the projections' connection (the same file);
        a memory store's projections live in a separate database, so it goes through the EventLog."""
        return self.path is not None

    def log_exists(self) -> bool:
        """Whether the file is there (a new store opens the EventLog first: it creates the tables)."""
        return self.path is not None and self.path.is_file()

    def log_env(self, synchronous: str) -> dict[str, str]:
        return {"PERSISTENCE_MODULE": "pmem.adapters.eventstore.sqlite_log:Factory", "SQLITE_DBNAME": self.db,
                "PMEM_SYNCHRONOUS": synchronous}

    def setting_up(self) -> AbstractContextManager[None]:
        return nullcontext()  # the tuned pool retries while another process switches the file to WAL

    def connect_projections(self, synchronous: str = "NORMAL") -> Any:
        from pmem.adapters.storage.projection_db import SqliteDb, connect

        return SqliteDb(connect(self.db, synchronous), fast_rebuild=self.fast_rebuild)

    def cache_path(self, name: str) -> Path | None:
        """A local cache file ``name`` (``vec-flat``, ...) next to the store file; None in memory."""
        return None if self.path is None else self.path.with_name(f"{self.path.name}.{name}")

    def embedding_cache_path(self) -> Path | None:
        return self.path  # a table in the store file itself


def _unopenable(file: Path) -> str | None:
    """Why a SQLite store cannot be opened at ``file``, or None (a new store's file need not exist yet)."""
    try:
        parent = file.resolve().parent
        if not parent.is_dir():
            return f"directory {parent} does not exist"
        file.stat()
    except FileNotFoundError:
        return None  # a new store: its first write makes the file
    except OSError as e:  # a name too long for the file system, a folder that cannot be searched...
        return e.strerror or type(e).__name__
    return None


@dataclass(frozen=True)
class PgBackend:
    """The log, the projections and the op-id table in one PostgreSQL schema; caches on local disk."""

    conninfo: dict[str, Any]  # psycopg.connect keywords: dbname, host, port, user, password
    schema: str
    label: str  # the URL without its password
    fast_rebuild = False
    lazy_log = False
    read_only: list[bool] = field(default_factory=lambda: [False])  # set by setting_up: a read-only session

    @classmethod
    def from_url(cls, url: str) -> PgBackend:
        parts = urlsplit(url)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        dbname = unquote(parts.path.lstrip("/"))
        host = query.pop("host", None) or parts.hostname
        schema = query.pop("schema", "public")
        if not dbname or not host:
            raise InvalidOperation(f"PostgreSQL URL {_redact(url)} must name a host and a database: "
                                   "postgresql://user@host:port/dbname", field="db")
        if query:
            raise InvalidOperation(f"PostgreSQL URL {_redact(url)}: unknown parameter {sorted(query)[0]!r} "
                                   "(expected schema or host)", field="db")
        try:
            port = parts.port or 5432
        except ValueError:
            raise InvalidOperation(f"PostgreSQL URL {_redact(url)} has an invalid port", field="db") from None
        user = unquote(parts.username or "") or os.environ.get("PGUSER") or _login()
        conninfo = {"dbname": dbname, "host": host, "port": port, "user": user,
                    "password": unquote(parts.password or "")}
        return cls(conninfo, schema, _redact(url))

    @property
    def errors(self) -> tuple[type[BaseException], ...]:
        return (_driver().Error,)

    def log_env(self, synchronous: str) -> dict[str, str]:
        c = self.conninfo
        return {"PERSISTENCE_MODULE": "pmem.adapters.eventstore.pg_log:Factory", "POSTGRES_DBNAME": c["dbname"],
                "POSTGRES_HOST": c["host"], "POSTGRES_PORT": str(c["port"]), "POSTGRES_USER": c["user"],
                "POSTGRES_PASSWORD": c["password"], "POSTGRES_SCHEMA": self.schema,
                "POSTGRES_CONNECT_TIMEOUT": os.environ.get("POSTGRES_CONNECT_TIMEOUT", "10"),
                "POSTGRES_POOL_SIZE": "2", "POSTGRES_MAX_OVERFLOW": "2",
                # a read-only session (a standby, a role with default_transaction_read_only) creates nothing
                "CREATE_TABLE": "no" if self.read_only[0] else "yes"}

    @contextmanager
    def setting_up(self) -> Iterator[None]:
        """Create the schema if needed and hold a session lock while the tables are created: processes
        opening a new store at once would otherwise race on ``CREATE TABLE IF NOT EXISTS``."""
        psycopg = _driver()
        try:
            conn = psycopg.connect(**self.conninfo, autocommit=True,
                                   connect_timeout=int(os.environ.get("POSTGRES_CONNECT_TIMEOUT", "10")))
        except psycopg.Error as e:
            raise StoreUnavailable(f"cannot open store {self.label}: {_first_line(e)}") from e
        try:
            self.read_only[0] = conn.execute("SHOW transaction_read_only").fetchone()[0] == "on"
            if not self.read_only[0]:  # a read-only session reads what exists (and fails where nothing does)
                conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (f"pmem-setup.{self.schema}",))
                conn.execute(psycopg.sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
                    psycopg.sql.Identifier(self.schema)))
            yield
        except psycopg.Error as e:
            raise StoreUnavailable(f"cannot open store {self.label}: {_first_line(e)}") from e
        finally:
            conn.close()  # ends the session, and with it the lock

    def connect_projections(self, synchronous: str = "NORMAL") -> Any:
        from pmem.adapters.storage.pg_db import PgDb

        psycopg = _driver()
        try:
            return PgDb(self.conninfo, self.schema, fast_rebuild=self.fast_rebuild)
        except psycopg.Error as e:
            raise StoreUnavailable(f"cannot open projections in {self.label}: {_first_line(e)}") from e

    def cache_dir(self) -> Path:
        root = os.environ.get("PMEM_CACHE_DIR") or Path(os.environ.get("XDG_CACHE_HOME") or
                                                        Path.home() / ".cache") / "pmem"
        c = self.conninfo
        key = hashlib.sha256(f"{c['host']}:{c['port']}/{c['dbname']}?schema={self.schema}".encode()).hexdigest()
        d = Path(root) / f"{c['dbname']}-{key[:12]}"
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreUnavailable(f"cannot create the local cache folder {d} for {self.label}: "
                                   f"{e.strerror}") from e
        return d

    def cache_path(self, name: str) -> Path:
        return self.cache_dir() / name

    def embedding_cache_path(self) -> Path:
        return self.cache_dir() / "embeddings.db"


def _driver() -> Any:
    try:
        import psycopg
        import psycopg.sql  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        raise StoreUnavailable(INSTALL_HINT) from None
    return psycopg


def _redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@")).geturl()


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def _login() -> str:
    import getpass

    return getpass.getuser()
