"""When the LLM extractor asks the slot card (docs/ingest.md#slots), and its default. A module of its own, with
no imports, so that the CLI's parser can name the choices without loading the extraction code."""

SLOT_MODES = ("off", "fallback", "only", "both")
"""Never; for a record the free-form facts left without a fact; instead of the free-form facts; as well as
them, for every record."""

DEFAULT_SLOT_MODE = "both"
"""The LLM route's default (``LlmExtractor``, ``make_extractor``, ``pmem ingest --slots``,
``python -m benchmarks.extraction``): both passes on every record, the one mode that raised precision and recall
together on both measured slices, at about twice the model calls (docs/decisions.md); ``"off"`` is the
cheaper free-form pass alone."""
