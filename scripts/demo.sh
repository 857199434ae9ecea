#!/usr/bin/env bash
# Set up (if needed) and run the main job: `pmem demo` on a fresh temporary store.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/pmem demo "$@"
