#!/usr/bin/env bash
# Set up (if needed) and run every test: unit, integration (real SQLite files and PostgreSQL), e2e (the
# pmem CLI), the reliability suite (tests/reliability), and the shared conformance check; lint and types first.
# The PostgreSQL cases run against a throwaway cluster started here (scripts/pg-cluster.sh: installed
# from Debian packages if missing, 127.0.0.1 only, removed on exit). If it cannot start, those cases
# FAIL; PMEM_TEST_SKIP_PG=1 skips them explicitly (a developer without PostgreSQL).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# Debian's Chromium for the browser tests (tests/browser: the memory inspector, the graph view's screenshot);
# without it they skip with a reason.
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  { apt-get install -y --no-install-recommends chromium || { apt-get update && apt-get install -y --no-install-recommends chromium; }
  } > .venv/chromium-install.log 2>&1 || echo "chromium could not be installed: the browser tests will skip" >&2
fi
scripts/check.sh
if [ "${PMEM_TEST_SKIP_PG:-}" != 1 ] && [ -z "${PMEM_TEST_PG:-}" ]; then
  pgdir=$(mktemp -d "${TMPDIR:-/tmp}/pmem-pg.XXXXXX")
  trap 'scripts/pg-cluster.sh stop "$pgdir"' EXIT
  if url=$(scripts/pg-cluster.sh start "$pgdir"); then
    export PMEM_TEST_PG=$url
  else
    echo "PostgreSQL could not be started: the PostgreSQL cases will fail (PMEM_TEST_SKIP_PG=1 skips them)" >&2
  fi
fi
.venv/bin/python -m pytest -q "$@"
