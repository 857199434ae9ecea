"""What ``pip install`` puts into an environment: one import name, ``pmem``, and a small core.

The wheel is built from a copy of the source tree (so a stale or concurrently used ``build/`` folder
cannot leak into it), installed without dependencies into a fresh folder, and imported from there by
a new interpreter whose working directory is neutral. The dev environment has an editable install of
pmem (an import hook installed by a ``.pth`` file), so the checks assert that every module imported
comes from the installed copy. A fresh virtual environment with the wheel installed the ordinary way
checks that the repository root's own ``pmem/`` still imports whole from there.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("domain", "projections", "adapters")
OPTIONAL = ("litellm", "matplotlib", "networkx")

# Run in the installed copy: the top-level layer names must not import; pmem and its layers come from TARGET.
PROBE = """
import importlib, json, sys
target = sys.argv[1]
out = {}
for name in ("adapters", "domain", "projections"):
    try:
        importlib.import_module(name)
        out[name] = "imported"
    except ModuleNotFoundError as e:
        out[name] = "ModuleNotFoundError: " + str(e)
import pmem
import pmem.adapters, pmem.domain, pmem.projections
store_api = pmem.open
out["open"] = store_api.__module__ + "." + store_api.__name__
with pmem.open(sys.argv[2], embedder="hashing") as store:
    store.accept("home city", "Lisbon")
    out["value"] = store.get("home city").value
out["files"] = {m: getattr(sys.modules[m], "__file__", None) or "" for m in sorted(sys.modules)
                if m == "pmem" or m.startswith("pmem.")}
out["target"] = target
print(json.dumps(out))
"""


def _copy_source(dest: Path) -> Path:
    """The repository without caches, build outputs, the venv or VCS data."""
    def ignore(folder: str, names: list[str]) -> set[str]:
        return {n for n in names if n.startswith(".") or n in ("build", "results", "__pycache__")
                or n.endswith((".egg-info", ".db", ".db-wal", ".db-shm"))}

    shutil.copytree(ROOT, dest, ignore=ignore)
    return dest


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("wheel")
    src = _copy_source(base / "src")
    out = base / "dist"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                        "--disable-pip-version-check", ".", "-w", str(out)],
                       cwd=src, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    (whl,) = out.glob("pmem-*.whl")
    return whl


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site") / "target"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q",
                        "--disable-pip-version-check", "--target", str(target), str(wheel)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return target


def test_the_wheel_holds_one_top_level_package_and_the_embedder_data(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    name, version = wheel.name.split("-")[:2]
    assert {n.split("/")[0] for n in names} == {"pmem", f"{name}-{version}.dist-info"}
    assert not any(n.startswith(tuple(f"{layer}/" for layer in LAYERS)) for n in names)
    data = "pmem/adapters/embedders/data/all-MiniLM-L6-v2/"
    assert {data + "tokenizer.json", data + "NOTICE"} <= set(names)
    ui = "pmem/adapters/servers/ui/assets/"  # the memory inspector's page (docs/inspector.md)
    assert {ui + "index.html", ui + "inspector.js", ui + "inspector.css"} <= set(names)
    integrations = {f"pmem/integrations/{p.name}" for p in (ROOT / "pmem" / "integrations").glob("*.py")}
    assert integrations and integrations <= set(names), sorted(integrations - set(names))  # docs/integrations.md
    # Every module of each layer is inside pmem/, and nothing else came along (no tests, no scripts).
    sources = {f"pmem/{layer}/{p.relative_to(ROOT / layer).as_posix()}" for layer in LAYERS
               for p in (ROOT / layer).rglob("*.py")}
    assert sources and sources <= set(names), sorted(sources - set(names))
    assert not [n for n in names if n.startswith(("pmem/tests/", "pmem/scripts/", "tests/", "scripts/"))]


def _probe(installed: Path, tmp_path: Path, python_args: list[str], env: dict[str, str]) -> dict[str, object]:
    cwd = tmp_path / "neutral"  # nothing importable here
    cwd.mkdir()
    r = subprocess.run([sys.executable, *python_args, PROBE, str(installed), str(tmp_path / "mem.db")],
                       cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out: dict[str, object] = json.loads(r.stdout)
    return out


def _assert_from_target(out: dict[str, object], installed: Path) -> None:
    for name in LAYERS:
        assert str(out[name]).startswith("ModuleNotFoundError"), (name, out[name])
    assert out["open"] == "pmem.adapters.service.store.open_store"
    assert out["value"] == "Lisbon"
    files = out["files"]
    assert isinstance(files, dict)
    for name in ("pmem", "pmem.adapters", "pmem.domain", "pmem.projections", "pmem.adapters.service.store"):
        assert Path(files[name]).is_relative_to(installed), (name, files[name])
    outside = {m: f for m, f in files.items() if f and not Path(f).is_relative_to(installed)}
    assert not outside, outside  # not one module from the source tree through the editable hook


def test_the_installed_wheel_imports_as_pmem_only(installed: Path, tmp_path: Path) -> None:
    """Isolated mode, no site processing: sys.path is the wheel's folder, the standard library and the
    environment's site-packages (for the dependencies), with no ``.pth`` file run, so no editable hook."""
    paths = sysconfig.get_paths()
    site_dirs = list(dict.fromkeys([paths["purelib"], paths["platlib"]]))
    code = f"import sys; sys.path[:0] = [sys.argv[1]]; sys.path += {site_dirs!r}\n" + PROBE
    cwd = tmp_path / "neutral"
    cwd.mkdir()
    r = subprocess.run([sys.executable, "-I", "-S", "-c", code, str(installed), str(tmp_path / "mem.db")],
                       cwd=cwd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    _assert_from_target(json.loads(r.stdout), installed)


def test_the_installed_wheel_wins_over_the_editable_install(installed: Path, tmp_path: Path) -> None:
    """The ordinary start-up (site-packages and its ``.pth`` files, the editable hook included) with the
    wheel's folder on PYTHONPATH and ``-P`` (no script or working directory on sys.path)."""
    out = _probe(installed, tmp_path, ["-P", "-c"], {"PYTHONPATH": str(installed), "PATH": "/usr/bin:/bin"})
    _assert_from_target(out, installed)


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel installed the ordinary way (not editable); its python.

    The dependencies come from this environment's site-packages through a ``.pth`` line, so nothing is
    downloaded. Python runs the ``.pth`` files of site-packages only, not those of a folder a ``.pth`` line
    adds, so the editable install's hook stays out of it."""
    env = tmp_path_factory.mktemp("venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    python = env / "bin" / "python"
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index", "--no-deps",
                        "-q", "--disable-pip-version-check", str(wheel)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    assert (Path(site) / "pmem" / "domain" / "__init__.py").is_file()
    paths = sysconfig.get_paths()
    (Path(site) / "pmem-test-dependencies.pth").write_text("\n".join(dict.fromkeys([paths["purelib"],
                                                                                    paths["platlib"]])) + "\n")
    return python


# `python -c` as a user types it: pmem, its layers and a store, and where each pmem module came from.
VENV_PROBE = """
import json, sys
import pmem, pmem.domain
with pmem.open(sys.argv[1], embedder="hashing") as store:
    store.accept("home city", "Lisbon")
    value = store.get("home city").value
files = {m: getattr(mod, "__file__", None) or "" for m, mod in sys.modules.items() if m.split(".")[0] == "pmem"}
print(json.dumps({"value": value, "files": files}))
"""


def _run_in_venv(python: Path, cwd: Path, db: Path) -> dict[str, str]:
    r = subprocess.run([str(python), "-c", VENV_PROBE, str(db)], cwd=cwd, env={"PATH": "/usr/bin:/bin"},
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["value"] == "Lisbon"
    files: dict[str, str] = out["files"]
    return files


def test_a_non_editable_install_imports_from_its_site_packages(venv: Path, tmp_path: Path) -> None:
    cwd = tmp_path / "neutral"
    cwd.mkdir()
    files = _run_in_venv(venv, cwd, tmp_path / "mem.db")
    env = venv.parents[1]
    assert Path(files["pmem.domain"]).is_relative_to(env), files["pmem.domain"]
    outside = {m: f for m, f in files.items() if f and not Path(f).is_relative_to(env)}
    assert not outside, outside


def test_the_checkout_imports_whole_from_its_root_beside_a_non_editable_install(venv: Path, tmp_path: Path) -> None:
    """From the repository root, the working directory comes first on sys.path, so the root's ``pmem/``
    shadows the installed copy. Its layers sit beside it, not inside it: ``pmem`` must still import, and
    every module of the package must come from the checkout (none from the installed copy, no mix)."""
    files = _run_in_venv(venv, ROOT, tmp_path / "mem.db")
    assert Path(files["pmem"]) == ROOT / "pmem" / "__init__.py"
    assert Path(files["pmem.domain"]) == ROOT / "domain" / "__init__.py"
    assert Path(files["pmem.adapters.service.store"]) == ROOT / "adapters" / "service" / "store.py"
    outside = {m: f for m, f in files.items() if f and not Path(f).is_relative_to(ROOT)}
    assert not outside, outside


def test_the_core_dependencies_leave_out_the_optional_parts() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

    def name(req: str) -> str:
        return re.split(r"[\s\[<>=!~;]", req, maxsplit=1)[0].lower()

    core = {name(r) for r in project["dependencies"]}
    assert not core & set(OPTIONAL), core & set(OPTIONAL)
    extras = {extra: {name(r) for r in reqs} for extra, reqs in project["optional-dependencies"].items()}
    assert extras["llm"] == {"litellm"}
    assert extras["graph"] == {"networkx"}
    assert extras["bench"] == {"matplotlib"}
    assert {"psycopg", "eventsourcing"} <= extras["postgres"]
