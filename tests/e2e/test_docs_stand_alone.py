"""The documentation stands alone: README.md and docs/*.md never send a reader outside the repository.

No page may name the shared workspace (``../shared``) or the specification file kept there, or link
to a web host other than this machine (localhost examples in commands are fine). Every relative
markdown link, image included, must point to a file of the repository, and an ``#anchor`` to a
heading of that page. README.md stays short.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [ROOT / "README.md", *DOCS]
README_MAX_LINES = 250
# The pages the README's documentation list promises (docs/architecture.md and docs/cli.md included).
REQUIRED = ("concepts", "python-api", "decisions", "benchmarks", "projections", "search", "graph",
            "postgres", "reliability", "ingest", "embedders", "reading", "scaling")

URL = re.compile(r"\bhttps?://([^/\s)\]>`'\"]+)", re.I)
LOCAL_HOSTS = {"localhost", "127.0.0.1", "[::1]"}
LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def prose(text: str) -> str:
    """The page without its fenced code blocks (a ``](x)`` in code is not a link)."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append(line)
    return "\n".join(out)


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|__", "", heading).strip().lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in prose(page.read_text()).splitlines():
        m = HEADING.match(line)
        if m is None:
            continue
        s = slug(m.group(2))
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return out


def test_there_is_documentation_to_check() -> None:
    assert (ROOT / "README.md").is_file()
    assert DOCS, "no docs/*.md found: nothing would be checked"
    missing = [name for name in REQUIRED if not (ROOT / "docs" / f"{name}.md").is_file()]
    assert not missing, f"docs pages missing: {missing}"


def test_the_readme_is_short() -> None:
    n = len((ROOT / "README.md").read_text().splitlines())
    assert n <= README_MAX_LINES, f"README.md has {n} lines (at most {README_MAX_LINES})"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_points_outside_the_repository(page: Path) -> None:
    problems = []
    for n, line in enumerate(page.read_text().splitlines(), 1):
        if "../shared" in line:
            problems.append(f"{n}: names ../shared")
        if "SPEC.md" in line:
            problems.append(f"{n}: names SPEC.md")
        for m in URL.finditer(line):
            host = m.group(1).rsplit("@", 1)[-1]
            host = host if host.startswith("[") else host.split(":", 1)[0]
            if host.lower() not in LOCAL_HOSTS:
                problems.append(f"{n}: links to {m.group(0)}")
    assert not problems, f"{page.relative_to(ROOT)}:\n" + "\n".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    links = LINK.findall(prose(page.read_text()))
    for target in links:
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):
            continue  # a scheme: http(s) hosts are checked above; mailto and the like name no file
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.is_relative_to(ROOT.resolve()):
            broken.append(f"{target}: leaves the repository")
        elif not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT.resolve())}")
    assert not broken, f"{page.relative_to(ROOT)}:\n" + "\n".join(broken)


def test_the_checks_see_links() -> None:
    """The link pattern finds links at all (a pattern that matched nothing would pass every page)."""
    assert LINK.findall("see [concepts](docs/concepts.md#cells) and ![g](graph.png)") == [
        "docs/concepts.md#cells", "graph.png"]
    assert any(LINK.findall(prose(p.read_text())) for p in PAGES)
    assert slug("Choosing the embedder: ONNX, hashing, or `litellm`") == (
        "choosing-the-embedder-onnx-hashing-or-litellm")
