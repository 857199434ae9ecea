"""docs/cli.md is what ``scripts/gen_cli_docs.py`` writes from ``pmem --help``, and the CLI's code stays
in short functions (the parser is built from a table, so no function has to grow with the commands)."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import ROOT

SCRIPT = ROOT / "scripts" / "gen_cli_docs.py"
DOC = ROOT / "docs" / "cli.md"
ENTRYPOINTS = ROOT / "adapters" / "entrypoints"
MAX_FUNCTION_LINES = 60


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_cli_docs", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_docs_cli_md_is_the_generated_help() -> None:
    want = generator().render()
    assert DOC.is_file(), "docs/cli.md is missing: run `python scripts/gen_cli_docs.py`"
    assert DOC.read_text(encoding="utf-8") == want, (
        "docs/cli.md differs from the CLI's --help: run `python scripts/gen_cli_docs.py`")


def test_the_page_has_every_command_and_sends_no_one_outside_the_repository() -> None:
    text = generator().render()
    for command in ("apply", "revise", "read", "worker", "ingest", "next", "graph export", "demo"):
        assert f"## `pmem {command}`" in text
    assert "SPEC" not in text and "../shared" not in text


def test_the_width_is_fixed_whatever_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.setenv("COLUMNS", "40")
    assert generator().render() == DOC.read_text(encoding="utf-8")
    assert os.environ["COLUMNS"] == "40"  # and the caller's setting is left as it was


def functions(path: Path) -> list[tuple[str, int]]:
    """(name, lines from ``def`` to the end of the body) of every function and method in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [(node.name, (node.end_lineno or node.lineno) - node.lineno + 1) for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]


def test_no_function_in_the_entry_points_runs_past_60_lines() -> None:
    files = sorted(ENTRYPOINTS.glob("*.py"))
    assert files and any(functions(f) for f in files), f"no Python functions found under {ENTRYPOINTS}"
    long = [f"{f.relative_to(ROOT)}: {name} has {n} lines" for f in files for name, n in functions(f)
            if n > MAX_FUNCTION_LINES]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(long)


def test_the_line_count_sees_a_long_function(tmp_path: Path) -> None:
    source = tmp_path / "long.py"
    source.write_text("def f():\n" + "    x = 1\n" * 70 + "\n\nasync def g():\n    pass\n")
    assert functions(source) == [("f", 71), ("g", 2)]


def test_help_for_an_unknown_command_is_one_json_line_and_exit_2() -> None:
    import json
    import subprocess

    from tests.conftest import PMEM_BIN

    r = subprocess.run([PMEM_BIN, "bogus", "--help"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == ""
    assert json.loads(r.stderr)["error"] == "usage" and "bogus" in json.loads(r.stderr)["detail"]
