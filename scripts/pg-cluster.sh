#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for tests and benchmarks.
#   scripts/pg-cluster.sh start DIR   initdb in DIR (if new), start it on 127.0.0.1 and a socket in DIR,
#                                     print the URL: postgresql://pmem@127.0.0.1:PORT/postgres
#   scripts/pg-cluster.sh stop DIR    stop it and remove DIR
# Installs Debian's postgresql package when no initdb is found. initdb refuses to run as root, so as root
# the cluster belongs to the `postgres` OS user (created by the Debian package). Trust authentication,
# and nothing listens beyond 127.0.0.1: it is for throwaway data only.
set -euo pipefail
cmd=${1:?usage: pg-cluster.sh start|stop DIR}
dir=${2:?usage: pg-cluster.sh start|stop DIR}

find_bin() {
  local d
  for d in ${PMEM_PG_BIN:-} /usr/lib/postgresql/*/bin; do
    if [ -n "$d" ] && [ -x "$d/initdb" ]; then echo "$d"; return; fi
  done
  command -v initdb >/dev/null 2>&1 && dirname "$(command -v initdb)"
}

as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "$cmd" in
start)
  bin=$(find_bin || true)
  if [ -z "$bin" ] && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    { apt-get install -y --no-install-recommends postgresql ||
      { apt-get update && apt-get install -y --no-install-recommends postgresql; }; } >&2
    bin=$(find_bin || true)
  fi
  [ -n "$bin" ] || { echo "PostgreSQL is not installed and could not be installed (apt-get install postgresql)" >&2; exit 1; }
  mkdir -p "$dir"
  [ "$(id -u)" = 0 ] && chown postgres: "$dir" && chmod 700 "$dir"
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    as_owner "$bin/initdb" -D "$dir/data" -U pmem --auth=trust --encoding=UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 ||
      { cat "$dir/initdb.log" >&2; exit 1; }
  fi
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  # fsync stays on (the default): the benchmark compares durable commits on both backends.
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=200" >/dev/null ||
    { cat "$dir/server.log" >&2; exit 1; }
  echo "postgresql://pmem@127.0.0.1:$port/postgres"
  ;;
stop)
  bin=$(find_bin || true)
  if [ -n "$bin" ] && [ -f "$dir/data/postmaster.pid" ]; then
    as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$dir"
  ;;
*)
  echo "usage: pg-cluster.sh start|stop DIR" >&2; exit 2 ;;
esac
