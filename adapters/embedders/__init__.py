"""Text to vectors: the offline ONNX model (the default), a hashing embedder for tests and tiny setups,
any OpenAI-compatible server through litellm, and the text cache in front of them.

May import: the core and ``llm`` (the litellm loader)."""
