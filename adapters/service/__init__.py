"""The application: the composition root (``bootstrap``), the use cases (``writes``, ``reads``,
``searching``, ``admin``), ``Store`` (the public face, which only delegates), the context reader, ingest
and soft key identity.

May import: the core and every room above except ``entrypoints``."""
