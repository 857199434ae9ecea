"""Vector search over the versions open at an event index: the FAISS index (flat, HNSW or LSH) kept in
step with the vector projection, its cache file, and the eligibility filter.

May import: the core, ``storage``, ``eventstore``, ``readmodels`` and ``progress``."""
