"""Playwright against Debian's ``chromium`` (headless, no sandbox: the tests run as root in CI), and a real
``pmem serve`` over the demo's store; skipped with a reason where either is missing."""

from __future__ import annotations

import shutil
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WIDTH, HEIGHT = 1280, 800
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed "
                                                             "(scripts/test.sh installs Debian's chromium)")


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium browser (Playwright's Python package driving the system executable)."""
    from playwright.sync_api import sync_playwright

    assert CHROMIUM is not None
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            yield browser
        finally:
            browser.close()


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk."""
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n"), path
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)
