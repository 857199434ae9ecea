"""``pmem keys`` and ``pmem serve`` as a user runs them: bad input is one JSON line and exit 2, a missing
``server`` extra is the one-line hint, and no token ever shows in ``keys list``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.server.http_servers import add_key, pmem


@pytest.mark.parametrize("args", [
    ["keys", "add", "--source", "s", "--max-trust", "5"],  # no namespace
    ["keys", "add", "--namespace", "ns", "--max-trust", "5"],  # no source
    ["keys", "add", "--namespace", "ns", "--source", "s", "--max-trust", "101"],
    ["keys", "add", "--namespace", " ", "--source", "s", "--max-trust", "5"],
    ["keys", "revoke", "0123456789ab"],
    ["keys"],
    ["serve", "--port", "70000"],
    ["serve", "--workers", "0"],
])
def test_bad_input_exits_2_with_one_json_line(tmp_path: Path, args: list[str]) -> None:
    out = pmem(str(tmp_path / "mem.db"), *args)
    assert out.returncode == 2, (out.stdout, out.stderr)
    (line,) = out.stderr.splitlines()
    assert set(json.loads(line)) == {"error", "detail"}
    assert out.stdout == ""


def test_keys_list_and_revoke(tmp_path: Path) -> None:
    db = str(tmp_path / "mem.db")
    first = add_key(db, "ns", "other", source="agent", max_trust=30)
    second = add_key(db, "ns", source="reader", max_trust=0, read_only=True)
    assert first["namespaces"] == ["ns", "other"] and second["read_only"] is True
    revoked = json.loads(pmem(db, "keys", "revoke", first["key_id"]).stdout)
    assert revoked["key_id"] == first["key_id"] and revoked["revoked_at"]
    listed = pmem(db, "keys", "list").stdout
    assert first["token"] not in listed and second["token"] not in listed
    rows = [json.loads(line) for line in listed.splitlines()]
    assert [(r["key_id"], r["revoked_at"] is None) for r in rows] == [(first["key_id"], False),
                                                                      (second["key_id"], True)]


def test_serve_without_the_server_extra_names_it(tmp_path: Path) -> None:
    code = ("import sys; sys.modules['fastapi'] = None; from pmem.adapters.entrypoints.cli import main; "
            f"main(['--db', {str(tmp_path / 'mem.db')!r}, 'serve', '--insecure-local'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert json.loads(out.stderr) == {"error": "missing extra",
                                      "detail": "fastapi is not installed: pip install 'pmem[server]'"}
