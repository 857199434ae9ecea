"""Language models, always optional: the litellm client and settings, and the extractor, annotator,
judge and reader that use it.

May import: the core only."""
