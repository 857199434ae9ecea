"""Read models built from the event log, as pure folds (no I/O). ``replay`` is the reference: a fold of
the log from index 1. May import: ``pmem.domain`` only."""
