#!/usr/bin/env bash
# Set up (if needed) and run every test: unit, integration (real SQLite files), e2e (the pmem CLI),
# the slow crash and concurrency suites, and the shared conformance check; lint and types first.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/check.sh
exec .venv/bin/python -m pytest -q "$@"
