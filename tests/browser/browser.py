"""Playwright against Debian's ``chromium`` (headless, no sandbox: the tests run as root in CI), and a real
``pmem serve`` over the demo's store; skipped with a reason where either is missing. The browser itself is
the inspector benchmark's (benchmarks/browser.py), so both drive it the same way."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from benchmarks.browser import CHROMIUM, HEIGHT, WIDTH, chromium

__all__ = ["HEIGHT", "WIDTH", "chromium", "needs_chromium", "png_size"]
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed "
                                                             "(scripts/test.sh installs Debian's chromium)")


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk."""
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n"), path
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)
