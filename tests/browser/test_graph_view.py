"""``pmem graph export --format html`` (one self-contained page, no script) drawn by headless Chromium: a
screenshot that is a drawn PNG, not an empty page. (It moved here from tests/e2e/test_graph_cli.py, with
the inspector's browser tests.)"""

from __future__ import annotations

from pathlib import Path

from tests.browser.browser import chromium, needs_chromium, png_size
from tests.e2e.test_graph_cli import html_page, write


@needs_chromium
def test_the_html_view_renders_in_headless_chromium(db: str, tmp_path: Path) -> None:
    write(db)
    page = html_page(db, tmp_path)
    blank = tmp_path / "blank.html"
    blank.write_text("<!doctype html><html><body></body></html>")
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1000, "height": 760})
        tab = context.new_page()
        for url, out in ((page.as_uri(), tmp_path / "graph.png"), (blank.as_uri(), tmp_path / "blank.png")):
            tab.goto(url)
            tab.screenshot(path=str(out))
        context.close()
    assert png_size(tmp_path / "graph.png") == (1000, 760)
    assert "charles dickens" in page.read_text().lower()
    # drawn, not an empty page
    assert (tmp_path / "graph.png").stat().st_size > 5 * (tmp_path / "blank.png").stat().st_size
