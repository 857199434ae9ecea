"""Regenerate the memory inspector's screenshots in docs/ (docs/inspector.md): the four views at 1280x800,
taken by headless Debian chromium (Playwright) from a real ``pmem serve`` over the demo's store, exactly
as ``tests/browser/test_inspector.py`` takes them into a temporary folder (so it imports that test's
helpers: run it from the repository root, as a module).

    .venv/bin/python -m scripts.inspector_screenshots
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from benchmarks.browser import chromium
from tests.browser.demo_store import build
from tests.browser.test_inspector import screenshots
from tests.server.http_servers import add_key, serving

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="pmem-shots-") as tmp:
        demo = build(str(Path(tmp) / "demo.db"))
        token = str(add_key(demo.db, "default", source="inspector", max_trust=0, read_only=True)["token"])
        with serving(demo.db) as url, chromium() as browser:
            for path in screenshots(browser, url, token, demo, ROOT / "docs"):
                print(path.relative_to(ROOT))


if __name__ == "__main__":
    main()
