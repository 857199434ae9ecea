#!/usr/bin/env bash
# Set up (if needed) and run every test: unit, integration (real SQLite files), e2e (the pmem CLI),
# the reliability suite (tests/reliability: -m reliability), and the shared conformance check; lint and types first.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# Debian's Chromium for the graph view's screenshot test; without it that one test skips with a reason.
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  { apt-get install -y --no-install-recommends chromium || { apt-get update && apt-get install -y --no-install-recommends chromium; }
  } > .venv/chromium-install.log 2>&1 || echo "chromium could not be installed: the screenshot test will skip" >&2
fi
scripts/check.sh
exec .venv/bin/python -m pytest -q "$@"
