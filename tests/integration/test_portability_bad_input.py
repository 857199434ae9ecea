"""``pmem import`` refuses a bad export with one line (exit 2) and writes nothing: a truncated export, a
reordered line, a duplicate index, a damaged line, a missing or newer header, a partial export, and an
import into a store that is not empty. On each backend (the ``backend`` fixture) the target is checked
after: a new SQLite file is not left behind, a PostgreSQL schema holds no event, a non-empty store is
unchanged."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest

import pmem
from pmem.adapters.service.portability import export_lines
from tests.conftest import PMEM_BIN, Backend


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    source = str(tmp_path_factory.mktemp("src") / "src.db")
    with pmem.open(source) as s:
        s.apply([{"op": "accept", "key": f"k{i}", "value": str(i), "op_id": f"o{i}"} for i in range(6)])
        s.contest("k1", "x")
    return list(export_lines(source))


def _without(lines: list[bytes], *drop: int) -> list[bytes]:
    return [line for i, line in enumerate(lines) if i not in drop]


def _swapped(lines: list[bytes], a: int, b: int) -> list[bytes]:
    out = list(lines)
    out[a], out[b] = out[b], out[a]
    return out


CASES = {
    "truncated after an event": lambda e: e[:4],
    "truncated mid-line": lambda e: [*e[:3], e[3][:40]],
    "without its end line": lambda e: e[:-1],
    "a missing event": lambda e: _without(e, 3),
    "reordered lines": lambda e: _swapped(e, 2, 3),
    "a duplicate index": lambda e: [*e[:3], e[2], *e[3:]],
    "a damaged line": lambda e: [*e[:2], b"{not json\n", *e[3:]],
    "no header": lambda e: e[1:],
    "a newer format": lambda e: [e[0].replace(b'"pmem_export":1', b'"pmem_export":9'), *e[1:]],
    "a partial export": lambda e: [e[0].replace(b'"after":0', b'"after":2'), *e[3:]],
    "an empty file": lambda e: [],
    "a line after the end": lambda e: [*e, e[1]],
    "a cell id that is not hex": lambda e: [e[0], orjson.dumps({**orjson.loads(e[1]), "cell": "z" * 32}) + b"\n",
                                            *e[2:]],
}
EXPECTED = {
    "truncated after an event": "before the header's last index 7",
    "truncated mid-line": "damaged line",
    "without its end line": "ends without its \"end\" line",
    "a missing event": "where 3 was expected",
    "reordered lines": "reordered",
    "a duplicate index": "repeats",
    "a damaged line": "damaged line",
    "no header": "not a pmem export header",
    "a newer format": "newer than this release reads",
    "a partial export": "partial export",
    "an empty file": "no header line",
    "a line after the end": "follows the \"end\" line",
    "a cell id that is not hex": "damaged event line",
}


def _events_in(db: str) -> int | None:
    """The events of a target: None when it does not exist (a SQLite file never made)."""
    if "://" not in db and not Path(db).exists():
        return None
    with pmem.open(db) as s:
        return s.last_index()


def _import(db: str, data: bytes, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    f = tmp_path / "bad.jsonl"
    f.write_bytes(data)
    return subprocess.run([PMEM_BIN, "--db", db, "import", str(f)], capture_output=True, text=True)


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_export_is_refused_in_one_line_and_nothing_is_written(backend: Backend, tmp_path: Path,
                                                                   export: list[bytes], case: str) -> None:
    target = backend.new_url()
    r = _import(target, b"".join(CASES[case](export)), tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1
    err = orjson.loads(r.stderr)
    assert err["error"] == "bad export" and EXPECTED[case] in err["detail"] and "bad.jsonl line" in err["detail"]
    assert _events_in(target) in (None, 0)
    if backend.name == "sqlite":
        assert not Path(target).exists() and not Path(f"{target}-wal").exists()


def test_an_import_into_a_store_that_is_not_empty_is_refused_and_changes_nothing(
        backend: Backend, tmp_path: Path, export: list[bytes]) -> None:
    target = backend.new_url()
    with pmem.open(target) as t:
        t.accept("mine", "kept")
    before = [line for line in export_lines(target)]
    r = _import(target, b"".join(export), tmp_path)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert orjson.loads(r.stderr)["error"] == "target not empty"
    assert list(export_lines(target)) == before


def test_a_good_export_imports_through_the_cli_with_verify(backend: Backend, tmp_path: Path,
                                                          export: list[bytes]) -> None:
    target = backend.new_url()
    f = tmp_path / "good.jsonl"
    f.write_bytes(b"".join(export))
    r = subprocess.run([PMEM_BIN, "--db", target, "import", str(f), "--verify"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = orjson.loads(r.stdout)
    assert out["imported"] == 7 and out["op_ids"] == 6 and out["verified"][-1] == 7
    again = subprocess.run([PMEM_BIN, "--db", target, "export"], capture_output=True)
    assert again.returncode == 0
    got = again.stdout.splitlines(keepends=True)
    assert got[1:] == export[1:]  # the same lines after the header (whose source may differ)


def test_export_refuses_to_overwrite_a_file_and_leaves_none_when_the_store_is_missing(tmp_path: Path) -> None:
    taken = tmp_path / "taken.jsonl"
    taken.write_bytes(b"mine")
    source = tmp_path / "src.db"
    with pmem.open(source) as s:
        s.accept("k", "v")
    r = subprocess.run([PMEM_BIN, "--db", str(source), "export", "-o", str(taken)], capture_output=True, text=True)
    assert r.returncode == 2 and "exists" in orjson.loads(r.stderr)["detail"] and taken.read_bytes() == b"mine"
    out = tmp_path / "out.jsonl"
    r = subprocess.run([PMEM_BIN, "--db", str(tmp_path / "none.db"), "export", "-o", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "no such store file" in orjson.loads(r.stderr)["detail"] and not out.exists()
    assert not (tmp_path / "none.db").exists()
