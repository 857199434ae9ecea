"""The projections' stores: the frontier and history tables, the graph tables and the vector tables,
all on one tracking base (a position per projection, moved in the same transaction as the rows), the
registry of projection names, the parallel full rebuild, and what a ``pmem worker`` follows the log with.

May import: the core, ``storage``, ``eventstore`` and ``progress``."""
