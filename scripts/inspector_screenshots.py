"""Regenerate the memory inspector's screenshots in docs/ (docs/inspector.md): the four views at 1280x800,
taken by headless Debian chromium (Playwright) from a real ``pmem serve`` over the demo's store, exactly
as ``tests/browser/test_inspector.py`` takes them into a temporary folder.

    .venv/bin/python scripts/inspector_screenshots.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser.browser import chromium  # noqa: E402
from tests.browser.demo_store import build  # noqa: E402
from tests.browser.test_inspector import screenshots  # noqa: E402
from tests.server.http_servers import add_key, serving  # noqa: E402


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="pmem-shots-") as tmp:
        demo = build(str(Path(tmp) / "demo.db"))
        token = str(add_key(demo.db, "default", source="inspector", max_trust=0, read_only=True)["token"])
        with serving(demo.db) as url, chromium() as browser:
            for path in screenshots(browser, url, token, demo, ROOT / "docs"):
                print(path.relative_to(ROOT))


if __name__ == "__main__":
    main()
