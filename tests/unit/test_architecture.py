"""Dependencies point inward (STYLE habit 1): a walk over every import in the packages."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OURS = {"domain", "projections", "adapters", "pmem"}
ALLOWED_OURS = {"domain": {"domain"}, "projections": {"domain", "projections"},
                "adapters": {"domain", "projections", "adapters"}, "pmem": OURS}
IO_LIBRARIES = {"sqlite3", "sqlite_utils", "faiss", "litellm", "onnxruntime", "orjson", "socket", "subprocess",
                "requests", "httpx", "os", "pathlib", "io", "tempfile", "shutil", "psycopg", "eventsourcing.sqlite",
                "eventsourcing.postgres", "eventsourcing.application", "eventsourcing.persistence"}


def imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("package", sorted(ALLOWED_OURS))
def test_each_layer_imports_only_the_layers_inside_it(package: str) -> None:
    for path in (ROOT / package).rglob("*.py"):
        for name in imports(path):
            top = name.split(".")[0]
            if top in OURS:
                assert top in ALLOWED_OURS[package], f"{path.relative_to(ROOT)} imports {name}"


@pytest.mark.parametrize("package", ["domain", "projections"])
def test_the_core_does_no_io(package: str) -> None:
    for path in (ROOT / package).rglob("*.py"):
        for name in imports(path):
            assert name not in IO_LIBRARIES and name.split(".")[0] not in IO_LIBRARIES - {"eventsourcing"}, (
                f"{path.relative_to(ROOT)} imports {name}")
