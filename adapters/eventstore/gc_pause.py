"""Pausing the cyclic garbage collector around work that makes many long-lived objects and no cycles.

A big batch, a rebuild or a parse of many lines allocates hundreds of thousands of tuples, dicts and
operations that live to the end of the work. The collector would walk them again and again as they
are promoted (each full collection walks every object the process holds), while finding nothing to
free: nothing on these paths makes a reference cycle. Measured in docs/benchmarks.md.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def no_gc(when: bool = True) -> Iterator[None]:
    """The cyclic collector off inside the block (when ``when``), and back as it was after; nested
    blocks leave it to the outermost."""
    paused = when and gc.isenabled()
    if paused:
        gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()
