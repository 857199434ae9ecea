"""The pure core of P-Mem: cells, versions, typed operations and their events (SPEC §2-§5).

Nothing in this package performs I/O. It depends only on the standard library and on
``eventsourcing.domain`` for the event and aggregate base classes.
"""
