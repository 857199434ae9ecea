"""``pmem demo``: the paper's situations, walked through on a fresh temporary store."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TextIO


def run_demo(out: TextIO) -> None:
    out.write("demo placeholder\n")
