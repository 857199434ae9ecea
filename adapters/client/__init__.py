"""A remote store: ``pmem.connect`` (sync, over ``httpx.Client``) and ``pmem.connect_async`` (over
``httpx.AsyncClient``) give the local store's methods, arguments, return types and errors over the
HTTP API of ``pmem serve`` (docs/integrations.md).

May import only the core (``pmem.domain``, ``pmem.projections``) and httpx, lazily: a client needs
nothing of the server, the storage or the search.
"""
