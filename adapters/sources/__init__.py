"""Input records for ingest: text lines, JSON lines, and readers of conversation datasets (LoCoMo).

May import: the core only."""
