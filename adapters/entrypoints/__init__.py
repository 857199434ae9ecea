"""The ways in: the ``pmem`` command line, its graph commands, the projection worker and the demo (and
later the servers). Each is a thin layer over ``service``.

May import: anything in the package. Nothing imports it."""
