"""The pure core of P-Mem: cells, versions, typed operations and their events (docs/concepts.md).

Nothing in this package performs I/O. It depends only on the standard library and on
``eventsourcing.domain`` for the event and aggregate base classes. May import: nothing else of P-Mem.
"""
