"""The event log: the ``eventsourcing`` application over the tuned SQLite and PostgreSQL recorders, the
one event codec (encode, decode, upcast), and the raw log reader that answers plain reads without loading
``eventsourcing``.

May import: the core and ``storage``."""
