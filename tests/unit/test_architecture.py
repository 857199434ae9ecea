"""The layers and rooms of docs/architecture.md, checked over every import in the package (module-level,
inside functions and under ``TYPE_CHECKING`` alike): dependencies point inward and nothing is circular."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = (("pmem", ROOT / "pmem"), ("pmem.domain", ROOT / "domain"), ("pmem.projections", ROOT / "projections"),
           ("pmem.adapters", ROOT / "adapters"), ("pmem.integrations", ROOT / "pmem" / "integrations"))
# What each room may import of the package besides itself (docs/architecture.md has the same table).
# The core (domain, projections) is below every room of adapters, so it is not listed there.
MAY_IMPORT: dict[str, set[str]] = {
    "pmem.domain": set(),
    "pmem.projections": {"pmem.domain"},
    "pmem.adapters.progress": set(),
    "pmem.adapters.storage": set(),
    "pmem.adapters.sources": set(),
    "pmem.adapters.llm": set(),
    "pmem.adapters.embedders": {"pmem.adapters.llm"},
    "pmem.adapters.eventstore": {"pmem.adapters.storage"},
    "pmem.adapters.readmodels": {"pmem.adapters.storage", "pmem.adapters.eventstore", "pmem.adapters.progress"},
    "pmem.adapters.search": {"pmem.adapters.storage", "pmem.adapters.eventstore", "pmem.adapters.readmodels",
                             "pmem.adapters.progress"},
    "pmem.adapters.graph": {"pmem.adapters.llm"},
    "pmem.adapters.service": {"pmem.adapters.storage", "pmem.adapters.eventstore", "pmem.adapters.readmodels",
                              "pmem.adapters.search", "pmem.adapters.embedders", "pmem.adapters.llm",
                              "pmem.adapters.graph", "pmem.adapters.sources", "pmem.adapters.progress"},
    "pmem.adapters.servers": {"pmem.adapters.service"},
    "pmem.adapters.client": set(),
    # The doors for other frameworks' code sit outside the layers, on the public face and the ingest path.
    "pmem.integrations": {"pmem", "pmem.domain", "pmem.adapters.service", "pmem.adapters.sources"},
}
CORE = {"pmem.domain", "pmem.projections"}
IO_LIBRARIES = {"sqlite3", "sqlite_utils", "faiss", "litellm", "onnxruntime", "orjson", "socket", "subprocess",
                "requests", "httpx", "os", "pathlib", "io", "tempfile", "shutil", "psycopg", "eventsourcing.sqlite",
                "eventsourcing.postgres", "eventsourcing.application", "eventsourcing.persistence"}


@cache
def modules(folders: tuple[tuple[str, Path], ...] = FOLDERS) -> dict[str, Path]:
    """Every module of the package (installed name, folder) by its installed name."""
    found: dict[str, Path] = {}
    for prefix, folder in folders:
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            if prefix == "pmem" and len(parts) > 1:
                continue
            name = ".".join((prefix, *parts)).removesuffix(".__init__")
            found[name] = path
    return found


def imported(name: str, found: dict[str, Path] | None = None) -> set[str]:
    """The names ``name`` (one of ``found``, by default the package's modules) imports (absolute, relative
    ones resolved), wherever the statement is."""
    found = modules() if found is None else found
    path = found[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in found)
    return out


def ours(name: str, found: dict[str, Path] | None = None) -> set[str]:
    """The package's modules ``name`` imports (of ``found``, by default the package's modules)."""
    found = modules() if found is None else found
    return {i for i in imported(name, found) if i in found and i != name}


def room(name: str) -> str:
    """The layer or adapters room a module belongs to."""
    parts = name.split(".")
    return ".".join(parts[:3]) if parts[:2] == ["pmem", "adapters"] and len(parts) > 2 else ".".join(parts[:2])


def test_the_walk_finds_every_layer_and_room() -> None:
    rooms = {room(m) for m in modules()}
    assert set(MAY_IMPORT) | {"pmem.adapters.entrypoints", "pmem.adapters", "pmem"} == rooms | {"pmem"}
    assert len(modules()) > 80
    assert all(imported(m) for m in modules() if m.endswith(".cli"))


@pytest.mark.parametrize("name", sorted(MAY_IMPORT))
def test_each_room_imports_only_what_it_may(name: str) -> None:
    members = [m for m in modules() if room(m) == name]
    assert members, f"no modules found for {name}"
    allowed = MAY_IMPORT[name] | {name} | ({"pmem.adapters"} if name.startswith("pmem.adapters") else set())
    if name.startswith("pmem.adapters"):
        allowed |= CORE
    bad = [f"{m} imports {i}" for m in members for i in ours(m) if room(i) not in allowed]
    assert not bad, "\n".join(bad)


def test_nothing_below_the_entry_points_imports_them() -> None:
    bad = [f"{m} imports {i}" for m in modules() for i in ours(m)
           if room(i) == "pmem.adapters.entrypoints" and room(m) not in {"pmem.adapters.entrypoints"}]
    assert not bad, "\n".join(bad)


def import_cycles(found: dict[str, Path]) -> list[str]:
    """Every cycle of imports among ``found``, as ``a -> b -> a``."""
    graph = {m: ours(m, found) for m in found}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    cycles: list[str] = []

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                cycles.append(" -> ".join([*path[path.index(n):], n]))
            elif n not in state:
                visit(n, [*path, n])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    return cycles


def test_the_package_has_no_import_cycles() -> None:
    cycles = import_cycles(modules())
    assert not cycles, "\n".join(cycles)


def test_a_cycle_is_found_when_there_is_one(tmp_path: Path) -> None:
    """The walk itself can fail: two modules that import each other are reported, and one-way imports are not."""
    (tmp_path / "a.py").write_text("from pmem.b import x\n")
    (tmp_path / "b.py").write_text("def f():\n    from . import a\n")
    (tmp_path / "c.py").write_text("from pmem import a\n")
    assert import_cycles(modules((("pmem", tmp_path),))) == ["pmem.a -> pmem.b -> pmem.a"]


def documented_rules() -> dict[str, set[str]]:
    """The "may import" column of docs/architecture.md, as full names."""
    rooms = {r.rsplit(".", 1)[1]: r for r in MAY_IMPORT if r.startswith("pmem.adapters.")}
    rules: dict[str, set[str]] = {}
    for line in (ROOT / "docs" / "architecture.md").read_text().splitlines():
        if not line.startswith("| `pmem."):
            continue
        part, _, may = (c.strip() for c in line.strip("|").split("|"))
        names = set(re.findall(r"`([\w.]+)`", may))
        if may.startswith("every room except"):
            names = set(rooms) - names
        elif may == "anything":
            continue
        rules[part.strip("`")] = {rooms.get(n, n) for n in names} - {part.strip("`")}
    return rules


def test_docs_architecture_states_the_same_rules() -> None:
    assert documented_rules() == MAY_IMPORT


@pytest.mark.parametrize("name", sorted(CORE))
def test_the_core_does_no_io(name: str) -> None:
    members = [m for m in modules() if room(m) == name]
    assert members
    for m in members:
        for i in imported(m):
            assert i not in IO_LIBRARIES and i.split(".")[0] not in IO_LIBRARIES - {"eventsourcing"}, f"{m} imports {i}"


MAX_PUBLIC_METHODS = 15
MAX_FUNCTION_LINES = 60


def test_no_class_has_more_than_15_public_methods_and_no_function_runs_past_60_lines() -> None:
    """Modules and functions stay small. ``Store``, the public face, joins four role interfaces
    (``WriteApi``, ``ReadApi``, ``SearchApi``, ``AdminApi``); each is counted on its own."""
    too_big = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                public = [m.name for m in node.body if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)
                          and not m.name.startswith("_")]
                if len(public) > MAX_PUBLIC_METHODS:
                    too_big.append(f"{name}.{node.name}: {len(public)} public methods")
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    too_big.append(f"{name}.{node.name}: {lines} lines")
    assert modules() and not too_big, "\n".join(too_big)
