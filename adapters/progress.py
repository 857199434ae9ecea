"""Progress bars for long work (rebuilds, catch-ups, embedding, ingests): tqdm on a terminal, else nothing.

A :data:`Progress` is a factory ``progress(description, total) -> Bar``; the code doing the work
calls ``bar.update(n)`` as it goes and ``bar.close()`` at the end. A store is silent by default (a
library must not write to a terminal it was not given); the CLI passes :func:`terminal_progress`,
which draws only when stderr is a terminal, the work is at least :data:`MIN_TOTAL` units, and
``--quiet`` was not given. stdout stays pure JSON either way. tqdm is imported only to draw.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol, TextIO, TypeVar

MIN_TOTAL = 1_000  # below one projection batch of work, a bar would only flicker

T = TypeVar("T")


class Bar(Protocol):
    """What the working code sees of a progress bar."""

    def update(self, n: int = 1) -> object: ...

    def close(self) -> None: ...


Progress = Callable[[str, int], Bar]


class _SilentBar:
    """A bar that draws nothing."""

    def update(self, n: int = 1) -> None:
        """Nothing to draw."""

    def close(self) -> None:
        """Nothing to release."""


def silent(description: str, total: int) -> Bar:
    """The progress of a store nobody watches: nothing."""
    return _SilentBar()


def terminal_progress(stream: TextIO | None = None, *, quiet: bool = False) -> Progress:
    """Bars drawn on ``stream`` (default stderr) if it is a terminal and not ``quiet``; else silent."""
    out = sys.stderr if stream is None else stream
    if quiet or not out.isatty():
        return silent

    def make(description: str, total: int) -> Bar:
        if total < MIN_TOTAL:
            return _SilentBar()
        from tqdm import tqdm  # type: ignore[import-untyped]  # tqdm ships no stubs (types-tqdm)

        columns, lines = _size(out)
        bar: Bar = tqdm(total=total, desc=description, file=out, unit="ev", unit_scale=True, leave=False,
                        ncols=columns, nrows=lines)
        return bar

    return make


def _size(out: TextIO) -> tuple[int, int]:
    """The terminal's columns and lines; 80x24 where it reports 0 (a fresh pty does, and tqdm then
    draws nothing at all)."""
    try:
        size = os.get_terminal_size(out.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        return 80, 24
    return size.columns or 80, size.lines or 24


def tracked(items: Iterable[T], total: int, description: str, progress: Progress) -> Iterator[T]:
    """Yield ``items``, advancing a bar of ``total`` by one per item; the bar closes at the end."""
    bar = progress(description, total)
    try:
        for item in items:
            yield item
            bar.update(1)
    finally:
        bar.close()
