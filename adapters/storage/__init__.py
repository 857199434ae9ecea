"""Where a store lives: the backend chosen from its name (a SQLite file, memory, or a ``postgresql://``
URL) and the database connections the projections write through (SQLite and PostgreSQL dialects).

May import: the core (``pmem.domain``, ``pmem.projections``) only. Everything else in adapters builds on it."""
