#!/usr/bin/env bash
# Lint (ruff) and type-check (mypy --strict over the whole package: domain, projections and adapters).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
.venv/bin/ruff check domain projections adapters pmem tests scripts benchmarks
# The layer folders install as pmem.domain, pmem.projections and pmem.adapters; mypy reads no import
# hooks, so it checks them through a tree of links that has the installed shape.
tree=build/typecheck/pmem
mkdir -p "$tree"
ln -sfn ../../../pmem/__init__.py "$tree/__init__.py"
for layer in domain projections adapters; do ln -sfn "../../../$layer" "$tree/$layer"; done
ln -sfn ../../../pmem/integrations "$tree/integrations"  # pmem's own subpackage
MYPYPATH=build/typecheck .venv/bin/mypy -p pmem
