"""The optional parts are pip extras: ``llm`` (litellm), ``graph`` (networkx), ``bench`` (matplotlib).

Without one, the core still works, and the feature that needs it fails with one line that names the
extra to install. Each case runs in a fresh interpreter with the library hidden from the import
system (``sys.modules[name] = None``), as in an installation without that extra.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from pmem.domain.errors import InvalidOperation, MissingExtra, PmemError

ROOT = Path(__file__).resolve().parents[2]
OPTIONAL = ("litellm", "networkx", "matplotlib")
HINT = {"litellm": "llm", "networkx": "graph", "matplotlib": "bench"}


def hiding(*modules: str) -> str:
    return "import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in modules)


def cli(*modules: str) -> str:
    """A program that runs the ``pmem`` CLI in-process with ``modules`` hidden."""
    return hiding(*modules) + "from pmem.adapters.entrypoints.cli import main\nmain(sys.argv[1:])\n"


def run(code: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PMEM_")}  # no model server configured
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=120)


def one_line_naming(module: str) -> str:
    return json.dumps({"error": "missing extra",
                       "detail": f"{module} is not installed: pip install 'pmem[{HINT[module]}]'"},
                      separators=(",", ":"))


def test_missing_extra_is_a_setup_error_not_bad_input() -> None:
    e = MissingExtra("litellm", "llm")
    assert str(e) == "litellm is not installed: pip install 'pmem[llm]'"
    assert isinstance(e, PmemError) and not isinstance(e, InvalidOperation)  # the CLI exits 1, not 2
    assert isinstance(e, ImportError) and e.name == "litellm" and e.extra == "llm"
    again = pickle.loads(pickle.dumps(e))  # crosses worker processes intact
    assert type(again) is MissingExtra and str(again) == str(e) and again.extra == "llm"


# -- the core works without any optional part ---------------------------------------------------------
def test_the_cli_accepts_gets_and_searches_without_litellm_networkx_or_matplotlib(tmp_path: Path) -> None:
    code = cli(*OPTIONAL)
    db = str(tmp_path / "mem.db")
    common = ("--db", db, "--embedder", "hashing")
    r = run(code, *common, "accept", "home city", "Lisbon", cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert json.loads(r.stdout)["head"]["value"] == "Lisbon"
    r = run(code, *common, "get", "home city", cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert json.loads(r.stdout)["value"] == "Lisbon"
    r = run(code, *common, "search", "city", cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert rows and rows[0]["key"] == "home_city"


def test_the_llm_and_graph_modules_import_without_their_libraries(tmp_path: Path) -> None:
    """litellm and networkx are imported on first use, never when their modules are imported."""
    modules = ("pmem.adapters.llm.client", "pmem.adapters.llm.extractor", "pmem.adapters.llm.reader",
               "pmem.adapters.llm.judge", "pmem.adapters.embedders.litellm_embedder",
               "pmem.adapters.embedders.choice", "pmem.adapters.graph.view", "pmem.adapters.entrypoints.cli",
               "pmem.adapters.entrypoints.graph_cli", "pmem.adapters.service.store")
    r = run(hiding(*OPTIONAL) + "".join(f"import {m}\n" for m in modules) + "print('ok')", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr
    # With the libraries installed (the dev environment), importing these modules still loads none of them.
    r = run("import sys\n" + "".join(f"import {m}\n" for m in modules)
            + f"print(sorted(m for m in {OPTIONAL!r} if m in sys.modules))", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout == "[]\n", r.stdout + r.stderr


# -- llm ----------------------------------------------------------------------------------------------
def test_without_litellm_the_client_names_the_llm_extra(tmp_path: Path) -> None:
    code = hiding("litellm") + (
        "from pmem.adapters.llm.client import JsonModel, LlmSettings, _litellm\n"
        "from pmem.domain.errors import MissingExtra\n"
        "for call in (_litellm, lambda: JsonModel(LlmSettings('openai/x', 'http://127.0.0.1:9/v1'))):\n"
        "    try:\n"
        "        call()\n"
        "    except MissingExtra as e:\n"
        "        print(e.extra, e)\n")
    r = run(code, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["llm litellm is not installed: pip install 'pmem[llm]'"] * 2


def test_without_litellm_an_llm_ingest_fails_in_one_line_before_the_store_exists(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("my home city is now Lisbon\n")
    db = tmp_path / "mem.db"
    r = run(cli("litellm"), "--db", str(db), "--embedder", "hashing", "ingest", "notes.txt", "--extractor", "llm",
            "--model", "openai/local", "--api-base", "http://127.0.0.1:9/v1", cwd=tmp_path)
    assert (r.returncode, r.stdout, r.stderr.strip()) == (1, "", one_line_naming("litellm"))
    assert not db.exists()  # a bad choice creates nothing


def test_without_litellm_the_litellm_embedder_names_the_llm_extra(tmp_path: Path) -> None:
    db = str(tmp_path / "mem.db")
    r = run(cli("litellm"), "--db", db, "--embedder", "hashing", "accept", "home city", "Lisbon", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = run(cli("litellm"), "--db", db, "--embedder", "litellm:test-embed", "--embedder-base",
            "http://127.0.0.1:9/v1", "search", "city", cwd=tmp_path)
    assert (r.returncode, r.stdout, r.stderr.strip()) == (1, "", one_line_naming("litellm"))


# -- graph --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", [("next",), ("graph", "export", "--format", "html")])
def test_without_networkx_the_graph_commands_name_the_graph_extra(tmp_path: Path, command: tuple[str, ...]) -> None:
    db = str(tmp_path / "mem.db")
    r = run(cli("networkx"), "--db", db, "--embedder", "hashing", "accept", "alice.home_city", "Lisbon", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = run(cli("networkx"), "--db", db, "--embedder", "hashing", *command, cwd=tmp_path)
    assert (r.returncode, r.stdout, r.stderr.strip()) == (1, "", one_line_naming("networkx"))


# -- bench --------------------------------------------------------------------------------------------
def test_without_matplotlib_the_benchmark_plots_name_the_bench_extra_in_one_line(tmp_path: Path) -> None:
    code = hiding("matplotlib") + (
        "from pathlib import Path\n"
        "from benchmarks import harness\n"
        "harness.save_figure(lambda axes: None, Path('plot.png'))\n")
    r = run(code, cwd=tmp_path)
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == "matplotlib is not installed: install the bench extra: pip install '.[bench]'\n"
    assert not list(tmp_path.iterdir())  # failed before writing a plot
