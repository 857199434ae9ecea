"""The lock pins safe releases by hash, and the environment holds no unexpected ``.pth`` files.

litellm 1.82.7 and 1.82.8 were malicious uploads (they dropped a ``.pth`` file that runs at every
interpreter start); releases below 1.83.7 carry a proxy SQL injection; the ``proxy`` extra is never
installed. litellm is optional (the ``llm`` extra), yet the lock holds it, since setup installs every extra.
"""

from __future__ import annotations

import re
import site
import sysconfig
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements.lock"
SETUP_EXTRAS = ("dev", "postgres", "llm", "bench", "graph", "server", "langgraph")
EXPECTED_PTH = re.compile(r"^(distutils-precedence|__editable__\.pmem-[\w.]+|_virtualenv)\.pth$")


def pins() -> dict[str, str]:
    return {m.group(1).lower(): m.group(2)
            for m in re.finditer(r"^([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==([^\s\\;]+)", LOCK.read_text(), re.M)}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def test_every_locked_requirement_is_pinned_with_a_hash() -> None:
    blocks = re.split(r"\n(?=[A-Za-z0-9])", LOCK.read_text().split("\n\n", 1)[-1])
    reqs = [b for b in blocks if re.match(r"^[A-Za-z0-9_.\-]+(\[[^\]]*\])?==", b)]
    assert len(reqs) > 10
    assert all("--hash=sha256:" in b for b in reqs), [b.split()[0] for b in reqs if "--hash" not in b]


def test_the_lock_keeps_extras_so_pinned_lines_meet_extra_requirements() -> None:
    """litellm asks for ``httpx[http2]``: with stripped extras pip tries the newest httpx and --require-hashes fails."""
    text = LOCK.read_text()
    assert "--strip-extras" not in text.split("\n\n", 1)[0]
    assert re.search(r"^httpx\[http2\]==", text, re.M)


def test_the_lock_admits_no_known_bad_litellm() -> None:
    v = pins()["litellm"]
    assert v not in ("1.82.7", "1.82.8"), "malicious litellm release"
    assert version_tuple(v) >= (1, 83, 7), "litellm below 1.83.7 has a proxy SQL injection"
    text = LOCK.read_text()
    assert "litellm[proxy" not in text and "via litellm[proxy]" not in text


def test_pyproject_pins_litellm_exactly_without_the_proxy_extra() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    (spec,) = re.findall(r'"litellm[^"]*"', text)
    assert re.fullmatch(r'"litellm==\d+\.\d+\.\d+"', spec), spec


def test_litellm_is_not_a_core_dependency_but_pinned_exactly_in_the_llm_extra_and_the_lock() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    assert "litellm[" not in text, "no extra of litellm (its proxy above all) is ever installed"
    project = tomllib.loads(text)["project"]
    assert not [r for r in project["dependencies"] if r.lower().startswith("litellm")], "litellm must stay optional"
    extras = project["optional-dependencies"]
    holders = sorted(name for name, reqs in extras.items() if any(r.lower().startswith("litellm") for r in reqs))
    assert holders == ["llm"], holders
    (spec,) = [r for r in extras["llm"] if r.lower().startswith("litellm")]
    assert re.fullmatch(r"litellm==\d+\.\d+\.\d+", spec), spec  # exact, and no [proxy] or any other extra
    assert pins()["litellm"] == spec.split("==")[1], "the lock and the llm extra disagree on litellm"


def test_the_lock_covers_every_extra_that_setup_installs() -> None:
    """scripts/setup.sh installs the lock alone (then pmem with --no-deps): it must hold the core and the
    dev, postgres, llm, bench, graph, server and langgraph extras, so the demo and every test run from it."""
    header = LOCK.read_text().split("\n\n", 1)[0]
    assert all(f"--extra={e}" in header for e in SETUP_EXTRAS), header
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"]) + [r for e in SETUP_EXTRAS for r in project["optional-dependencies"][e]]
    names = {canonical(re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0]) for r in wanted}
    locked = {canonical(n) for n in pins()}
    assert names <= locked, sorted(names - locked)
    assert {"litellm", "networkx", "matplotlib", "psycopg", "pytest", "fastapi", "mcp", "cryptography"} <= locked


def test_no_unexpected_pth_files_in_the_environment() -> None:
    dirs = {Path(p) for p in [*site.getsitepackages(), sysconfig.get_paths()["purelib"]] if Path(p).is_dir()}
    found = sorted(p.name for d in dirs for p in d.glob("*.pth"))
    unexpected = [n for n in found if not EXPECTED_PTH.match(n)]
    assert not unexpected, f"unexpected .pth files (code that runs at interpreter start): {unexpected}"
