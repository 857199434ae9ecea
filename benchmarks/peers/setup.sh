#!/usr/bin/env bash
# Builds .venv-peers (ignored by git): P-Mem and Mem0 (mem0ai, pinned exactly) side by side, kept out of the
# project's own virtualenv and out of requirements.lock. Offline: packages come from the registries only.
#
#     bash benchmarks/peers/setup.sh        # then: .venv-peers/bin/python -m benchmarks.peers.mem0_peer --size 6k
set -euo pipefail
cd "$(dirname "$0")/../.."
MEM0=mem0ai==2.2.1
VENV=${PEERS_VENV:-.venv-peers}
PY=${PYTHON:-python3.11}

"$PY" -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
# P-Mem's core at the versions requirements.lock pins (its extras left out), except protobuf: mem0ai asks
# for protobuf<7 and the lock's onnx runs on either.
constraints=$(mktemp)
trap 'rm -f "$constraints"' EXIT
sed -n 's/^\([A-Za-z0-9_.-]*==[^ ]*\).*/\1/p' requirements.lock | grep -v '^protobuf==' >"$constraints"
"$VENV/bin/pip" install -q -c "$constraints" -e . "$MEM0"
"$VENV/bin/pip" check
"$VENV/bin/python" -c "import mem0, pmem; from importlib.metadata import version; print('mem0ai', version('mem0ai'), '+ pmem', version('pmem'))"
