"""Headless Chromium through Playwright, driving Debian's ``chromium`` (never a downloaded browser): the
inspector benchmark's browser, and the browser tests' (tests/browser/browser.py)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WIDTH, HEIGHT = 1280, 800


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium browser (no sandbox: the tests run as root in CI)."""
    from playwright.sync_api import sync_playwright

    if CHROMIUM is None:
        raise SystemExit("headless Chromium is not installed (scripts/test.sh installs Debian's chromium)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            yield browser
        finally:
            browser.close()
