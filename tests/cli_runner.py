"""``pmem ARGV`` run in this process: the very ``main`` the console script calls, with stdin, stdout, stderr
and the environment swapped for the call. A check of what the CLI prints and exits with then costs no
interpreter start-up, which imports the whole CLI afresh each time. Checks that only a real process can
make (the console script itself, signals, a kill, two processes at once) still start ``PMEM_BIN``."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence

from pmem.adapters.entrypoints.cli import main


def run_cli(argv: Sequence[str | bytes], stdin: bytes | None = None,
            env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    """What ``subprocess.run([PMEM_BIN, *argv], input=stdin, capture_output=True, env=env)`` returns. A bytes
    argument reaches ``main`` as a process's would: decoded with the file system's encoding."""
    args = [os.fsdecode(a) for a in argv]
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    saved_env = dict(os.environ)
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin or b""), encoding="utf-8")
    sys.stdout, sys.stderr = out, err
    if env is not None:
        os.environ.clear()
        os.environ.update(env)
    code: object = None
    try:
        main(args)
    except SystemExit as e:
        code = e.code
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        os.environ.clear()
        os.environ.update(saved_env)
        out.flush()
        err.flush()
    assert isinstance(code, int), f"main ended without an exit code: {code!r}"
    return subprocess.CompletedProcess(["pmem", *args], code, out.buffer.getvalue(), err.buffer.getvalue())
