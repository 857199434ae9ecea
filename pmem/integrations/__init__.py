"""Doors into P-Mem for code written against other memory layers (docs/integrations.md).

``pmem.integrations.langgraph.PMemStore`` is a LangGraph ``BaseStore`` (the ``langgraph`` extra), and
``pmem.integrations.mem0.Memory`` has the shape of Mem0's ``Memory``. Each works on any object with the
methods of ``pmem.Store`` (``_store.StoreLike``): a local store from ``pmem.open`` or a remote one.
"""
