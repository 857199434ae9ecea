#!/usr/bin/env bash
# Set up (if needed) and run the tests on every core (pytest-xdist). Other arguments go to pytest.
#
#   scripts/test.sh          every test, lint and types beside them: unit, integration, e2e, the servers, the browser,
#                            the reliability suite and the shared conformance check, on SQLite and on a
#                            throwaway PostgreSQL cluster started here. CI runs this.
#   scripts/test.sh --fast   the tier to run while working: SQLite only, no test marked slow, postgres,
#                            browser or llm (no PostgreSQL, Chromium or model server is needed), and half
#                            of each Hypothesis test's examples (PMEM_TEST_EXAMPLE_SHARE).
#
# The PostgreSQL cluster (scripts/pg-cluster.sh: installed from Debian packages if missing, 127.0.0.1 only,
# removed on exit) is required by the full run: if it cannot start, the PostgreSQL cases FAIL.
# PMEM_TEST_SKIP_PG=1 skips them explicitly (a developer without PostgreSQL).
set -euo pipefail
cd "$(dirname "$0")/.."
fast=
if [ "${1:-}" = --fast ]; then
  fast=1
  shift
fi
scripts/setup.sh
# Lint and types run beside the tests (the tests wait on processes and servers, leaving a core idle at times);
# their verdict is printed, and counts, at the end.
checklog=$(mktemp "${TMPDIR:-/tmp}/pmem-check.XXXXXX")
scripts/check.sh > "$checklog" 2>&1 &
checkpid=$!
checked() {
  local rc=0
  wait "$checkpid" || rc=$?
  cat "$checklog"
  rm -f "$checklog"
  [ "$rc" = 0 ] || echo "lint or type check FAILED (scripts/check.sh)" >&2
  return "$rc"
}
# Run the tests (the command given), then wait for the checks; exit non-zero if either failed.
run() {
  local rc=0
  "$@" || rc=$?
  checked || rc=1
  exit "$rc"
}
# One worker more than the cores: many tests wait on a child process, a server or PostgreSQL, so the cores
# would idle with one worker each.
workers=(-n "${PMEM_TEST_WORKERS:-$(($(nproc) + 1))}" --dist worksteal)
if [ -n "$fast" ]; then
  run env PMEM_TEST_SKIP_PG=1 PMEM_TEST_EXAMPLE_SHARE="${PMEM_TEST_EXAMPLE_SHARE:-0.5}" .venv/bin/python -m pytest -q \
    "${workers[@]}" -m "not slow and not postgres and not browser and not llm" "$@"
fi
# Debian's Chromium for the browser tests (tests/browser: the memory inspector, the graph view's screenshot);
# without it they skip with a reason.
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  { apt-get install -y --no-install-recommends chromium || { apt-get update && apt-get install -y --no-install-recommends chromium; }
  } > .venv/chromium-install.log 2>&1 || echo "chromium could not be installed: the browser tests will skip" >&2
fi
if [ "${PMEM_TEST_SKIP_PG:-}" != 1 ] && [ -z "${PMEM_TEST_PG:-}" ]; then
  pgdir=$(mktemp -d "${TMPDIR:-/tmp}/pmem-pg.XXXXXX")
  trap 'scripts/pg-cluster.sh stop "$pgdir"' EXIT
  if url=$(scripts/pg-cluster.sh start "$pgdir"); then
    export PMEM_TEST_PG=$url
  else
    echo "PostgreSQL could not be started: the PostgreSQL cases will fail (PMEM_TEST_SKIP_PG=1 skips them)" >&2
  fi
fi
run .venv/bin/python -m pytest -q "${workers[@]}" "$@"
