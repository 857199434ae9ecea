"""tests/data stands alone and says what it holds: every file there is described in its README, with its
size (the third-party files are copied unmodified), and every file the README describes is there."""

from __future__ import annotations

import re

from tests.conftest import ROOT

DATA = ROOT / "tests" / "data"


def described() -> dict[str, int]:
    """File name -> size in bytes, from the README's table rows: | `name` (1,234 bytes) | ..."""
    rows = re.findall(r"^\| `([^`]+)` \(([\d,]+) bytes\) \|", (DATA / "README.md").read_text(), re.MULTILINE)
    return {name: int(size.replace(",", "")) for name, size in rows}


def test_every_file_in_tests_data_is_described_with_its_size_and_nothing_described_is_missing() -> None:
    files = {p.relative_to(DATA).as_posix(): p.stat().st_size for p in DATA.rglob("*")
             if p.is_file() and p.name != "README.md"}
    assert files, f"no data files found under {DATA}"
    assert described() == files


def test_the_readme_carries_the_mit_licence_and_keeps_the_non_commercial_sets_out() -> None:
    text = (DATA / "README.md").read_text()
    assert "Permission is hereby granted, free of charge" in text and "Hu, Wang, McAuley" in text
    assert not any(DATA.rglob("locomo_conv*")) and not any(DATA.rglob("*halumem*"))
