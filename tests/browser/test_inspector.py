"""The memory inspector (``/ui`` on ``pmem serve``, docs/inspector.md) in a real headless Chromium, against
a real ``pmem serve`` over a store built by the demo's operations (tests/browser/demo_store.py), with a
read-only token entered in the page, as a person would."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.browser import HEIGHT, WIDTH, chromium, needs_chromium, png_size
from tests.browser.demo_store import DemoStore, build
from tests.server.http_servers import add_key, serving

pytestmark = needs_chromium
SHOTS = ("search", "cell", "contested", "graph")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoStore:
    return build(str(tmp_path_factory.mktemp("inspector") / "demo.db"))


@pytest.fixture(scope="module")
def token(demo: DemoStore) -> str:
    return str(add_key(demo.db, "default", source="inspector", max_trust=0, read_only=True)["token"])


@pytest.fixture(scope="module")
def server(demo: DemoStore, token: str) -> Iterator[str]:
    with serving(demo.db) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as b:
        yield b


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    p = context.new_page()
    p.set_default_timeout(30_000)
    errors: list[str] = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    yield p
    context.close()
    assert errors == []  # no script error on any page


def sign_in(page: Any, url: str, token: str) -> None:
    """Open ``url`` in a fresh tab and enter the token in the form the page asks with."""
    page.goto(url)
    page.fill("#token", token)
    page.press("#token", "Enter")
    page.wait_for_selector("#token-form", state="detached")


def current(page: Any) -> str:
    page.wait_for_selector("#current-value, #notice.error")
    assert page.locator("#notice.error").count() == 0, page.inner_text("#notice")  # what the page said
    return str(page.inner_text("#current-value"))


def travel(page: Any, n: int) -> None:
    drawn = page.get_attribute("#view", "data-drawn")
    page.fill("#as-of", str(n))
    page.press("#as-of", "Enter")
    expect(page.locator("#view")).not_to_have_attribute("data-drawn", str(drawn))
    page.wait_for_selector("#current-value")


def test_search_budget_reads_30k_current_with_50k_revoked(page: Any, server: str, token: str) -> None:
    sign_in(page, f"{server}/ui/", token)
    page.fill("#q", "budget")
    page.press("#q", "Enter")
    page.click("ul.cells a.key >> text=budget")
    page.wait_for_url(re.compile(r"/ui/cell/budget$"))
    assert current(page) == "$30k"
    rows = page.locator("#versions tbody tr")
    assert rows.count() == 2
    revoked = page.locator("#versions tr", has_text="$50k")
    assert "revoked" in revoked.inner_text() and "supersedes $30k" in revoked.inner_text()
    assert "scratch that, the raise is off" in page.inner_text("#receipts")  # why it changed


def test_a_search_answered_after_the_person_left_for_a_cell_does_not_draw_over_it(page: Any, server: str,
                                                                                  token: str) -> None:
    """A slow answer for the page left behind is dropped: the search is held until the cell is shown."""
    sign_in(page, f"{server}/ui/", token)  # the frontier, which lists budget
    held: list[Any] = []
    page.route("**/v1/search?*", lambda route: held.append(route))
    page.fill("#q", "budget")
    page.press("#q", "Enter")
    page.click("ul.cells a.key >> text=budget")  # on the frontier still shown: the search is not answered
    assert current(page) == "$30k"
    drawn = page.get_attribute("#view", "data-drawn")
    assert len(held) == 1
    with page.expect_response("**/v1/search?*"):
        held[0].continue_()
    page.wait_for_timeout(500)  # the time the page takes to read the answer (it draws nothing, so no event to await)
    assert page.get_attribute("#view", "data-drawn") == drawn
    assert current(page) == "$30k" and page.url.endswith("/ui/cell/budget")


def test_time_travel_to_just_after_the_raise_reads_50k(page: Any, server: str, token: str,
                                                         demo: DemoStore) -> None:
    sign_in(page, f"{server}/ui/cell/budget", token)
    assert current(page) == "$30k"
    travel(page, demo.raised_at)
    assert current(page) == "$50k" and page.url.endswith(f"/ui/cell/budget?as_of={demo.raised_at}")
    assert page.input_value("#slider") == str(demo.raised_at)
    page.click("#now")
    expect(page.locator("#current-value")).to_have_text("$30k")


def test_the_slider_and_the_keyboard_move_time(page: Any, server: str, token: str, demo: DemoStore) -> None:
    sign_in(page, f"{server}/ui/cell/budget?as_of={demo.raised_at + 1}", token)
    assert current(page) == "$30k"  # just after the revoke
    page.focus("#view")
    page.keyboard.press("[")  # one event back: the raise
    expect(page.locator("#current-value")).to_have_text("$50k")
    page.focus("#slider")
    page.keyboard.press("ArrowLeft")  # one more: before the raise
    page.wait_for_url(re.compile(rf"as_of={demo.raised_at - 1}$"))
    expect(page.locator("#current-value")).to_have_text("$30k")


def test_the_contested_meeting_room_before_resolution_shows_both_rooms_with_trust(
        page: Any, server: str, token: str, demo: DemoStore) -> None:
    sign_in(page, f"{server}/ui/cell/meeting_room", token)
    assert current(page) == "Room B" and page.locator("#contested").count() == 0
    travel(page, demo.contested_at)
    text = page.inner_text("#contested")
    assert "Room A — trust 70" in text and "Room B — trust 70" in text
    assert "contested" in page.inner_text("p.current")


def test_the_graph_opens_and_clicks_through_to_a_neighbours_cell(page: Any, server: str, token: str) -> None:
    sign_in(page, f"{server}/ui/cell/our_mutual_friend.author", token)
    page.click("text=Graph neighbourhood")
    page.wait_for_url(re.compile(r"/ui/graph/our_mutual_friend\.author$"))
    page.wait_for_selector("#what-next li")  # what_next beside the graph
    labels = page.locator(".node .label").all_text_contents()
    assert "Charles Dickens" in labels and "our mutual friend" in labels
    assert page.locator(".node[data-id='united_kingdom']").count() == 0
    page.click(".node[data-id='portsmouth'] circle")
    page.click("#expand")
    page.wait_for_selector(".node[data-id='united_kingdom']")
    assert "London" not in page.locator(".node .label").all_text_contents()  # one hop, not the whole graph
    page.click(".node[data-id='charles_dickens'] circle")
    page.click("#node-panel a.key >> text=charles_dickens.spouse")
    page.wait_for_url(re.compile(r"/ui/cell/charles_dickens\.spouse$"))
    assert current(page) == "Catherine Dickens" and "Ellen Ternan" in page.inner_text("#contested")


def test_the_graph_is_usable_from_the_keyboard(page: Any, server: str, token: str) -> None:
    sign_in(page, f"{server}/ui/graph/charles_dickens.spouse", token)
    page.focus(".node[data-id='catherine_dickens']")
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.textContent") == "catherine_dickens.country_of_citizenship"
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"/ui/cell/catherine_dickens\.country_of_citizenship$"))
    assert current(page) == "United Kingdom"


def test_a_deep_link_opens_its_view_after_the_token(page: Any, server: str, token: str, demo: DemoStore) -> None:
    sign_in(page, f"{server}/ui/cell/meeting_room?as_of={demo.contested_at}", token)
    assert current(page) == "Room A" and "Room B" in page.inner_text("#contested")
    page.goto(f"{server}/ui/?q=payee")  # the token is kept for the tab: no second prompt
    page.wait_for_selector("ul.cells")
    assert page.locator("#token").count() == 0 and page.input_value("#q") == "payee"
    assert "payee_account" in page.inner_text("ul.cells")


def test_the_frontier_filters_and_what_changed(page: Any, server: str, token: str, demo: DemoStore) -> None:
    sign_in(page, f"{server}/ui/?contested=1&as_of={demo.contested_at}", token)
    assert page.locator("ul.cells a.key").all_inner_texts() == ["meeting_room"]
    page.goto(f"{server}/ui/?contested=1")
    page.wait_for_selector("ul.cells")
    assert page.locator("ul.cells a.key").all_inner_texts() == ["charles_dickens.spouse"]
    page.goto(f"{server}/ui/changes?since={demo.raised_at}&until={demo.contested_at + 1}")
    table = page.inner_text("table")
    assert "budget" in table and "$50k" in table and "$30k" in table and "meeting_room" in table
    assert "5k_pb" not in table  # unchanged in between


def test_a_wrong_token_says_so_and_asks_again(page: Any, server: str) -> None:
    page.goto(f"{server}/ui/cell/budget")
    page.fill("#token", "pmem_0123456789ab_wrong")
    page.press("#token", "Enter")
    # The first prompt is already an error notice; wait for the answer to the token itself.
    page.wait_for_selector("#notice.error:has-text('refused this token')")
    notice = page.inner_text("#notice")
    assert "refused this token" in notice and "unauthorized" in notice
    assert page.locator("#token").is_visible()  # not a blank page: the form is there to try again


def test_the_page_fetches_nothing_but_its_own_server(page: Any, server: str, token: str) -> None:
    urls: list[str] = []
    page.on("request", lambda r: urls.append(r.url))
    sign_in(page, f"{server}/ui/graph/our_mutual_friend.author", token)
    page.wait_for_selector(".node")
    assert urls and all(u.startswith(server + "/") or u.startswith("data:") for u in urls), urls


def test_without_a_token_on_an_insecure_local_server(browser: Any, tmp_path: Path) -> None:
    local = build(str(tmp_path / "local.db"))
    context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    try:
        with serving(local.db, "--insecure-local") as url:
            page = context.new_page()
            page.goto(f"{url}/ui/cell/budget")
            page.wait_for_selector("#current-value")
            assert current(page) == "$30k" and page.locator("#token").count() == 0
    finally:
        context.close()


def screenshots(browser: Any, server: str, token: str, demo: DemoStore, out: Path) -> list[Path]:
    """The four views at 1280x800 as PNGs in ``out`` (``python -m scripts.inspector_screenshots`` writes docs/'s)."""
    context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    page = context.new_page()
    views = {"search": ("/ui/?q=budget", "ul.cells"), "cell": ("/ui/cell/budget", "#versions"),
             "contested": (f"/ui/cell/meeting_room?as_of={demo.contested_at}", "#contested"),
             "graph": ("/ui/graph/our_mutual_friend.author", ".node")}
    paths = []
    try:
        sign_in(page, f"{server}/ui/", token)
        for name, (path, ready) in views.items():
            page.goto(server + path)
            page.wait_for_selector(ready)
            if name == "graph":
                page.wait_for_selector("#what-next li")
                page.click(".node[data-id='charles_dickens'] circle")
            paths.append(out / f"inspector-{name}.png")
            page.screenshot(path=str(paths[-1]))
    finally:
        context.close()
    return paths


def test_screenshots_at_1280x800_render(browser: Any, server: str, token: str, demo: DemoStore,
                                        tmp_path: Path) -> None:
    paths = screenshots(browser, server, token, demo, tmp_path)
    context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    blank = tmp_path / "blank.png"
    context.new_page().screenshot(path=str(blank))
    context.close()
    assert [p.name for p in paths] == [f"inspector-{n}.png" for n in SHOTS]
    for p in paths:
        assert png_size(p) == (WIDTH, HEIGHT)
        assert p.stat().st_size > 5 * blank.stat().st_size  # drawn, not an empty page
