#!/usr/bin/env bash
# Create .venv if missing and install P-Mem from the hashed lock. Shared by demo.sh and test.sh.
# The lock holds the core and the dev, postgres, llm, bench, graph, server and langgraph extras (everything the demo and the
# tests use), so P-Mem itself is installed with --no-deps. To regenerate it, see its header.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.pmem-lock-installed
want=$(sha256sum requirements.lock pyproject.toml | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  log=.venv/install.log
  echo "installing P-Mem and its locked dependencies into .venv (log: $log)" >&2
  # pip byte-compiles the installed modules on one core, half of the install's time: compileall does it on all
  # of them (and before the test workers would each compile the same modules at once).
  { .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-compile --require-hashes \
      -r requirements.lock &&
    .venv/bin/python -m compileall -q -j 0 .venv/lib >/dev/null &&
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
  } > "$log" 2>&1 || { cat "$log" >&2; exit 1; }
  echo "$want" > "$stamp"
fi
