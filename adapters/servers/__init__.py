"""The long-lived servers agents reach P-Mem through, each keeping one store (its embedder and indexes)
warm per process: the HTTP API (``http_*``: FastAPI under uvicorn, ``pmem serve``) and the MCP server
(``mcp_*``: the official MCP SDK, ``pmem mcp``). Both enforce credentials through one
:class:`pmem.adapters.service.guarded.GuardedStore`. FastAPI, uvicorn and the MCP SDK are the ``server``
extra, imported only when a server starts.

May import: the core and ``pmem.adapters.service`` only."""
