#!/usr/bin/env bash
# Lint (ruff) and type-check (mypy --strict on the pure core: domain/ and projections/).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
.venv/bin/ruff check domain projections adapters pmem tests scripts
.venv/bin/mypy
