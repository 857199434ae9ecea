"""The entity graph for people: export (JSON, DOT, HTML), PageRank and communities, cosine association
edges, graph-guided multi-hop reading, and the conflict check before a write.

May import: the core and ``llm``."""
