"""The machine's processes as /proc shows them, for tests of child processes that must end with their
parent: a zombie (ended, not yet reaped) counts as gone."""

from __future__ import annotations

from pathlib import Path


def parents() -> dict[int, int]:
    """Every running process's parent."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                found[int(entry.name)] = int(fields[1])
    return found


def descendants(pid: int) -> set[int]:
    """The running processes below ``pid``."""
    known, found, todo = parents(), set(), [pid]
    while todo:
        p = todo.pop()
        children = {c for c, parent in known.items() if parent == p}
        found |= children
        todo.extend(children)
    return found


def running(*pids: int) -> list[int]:
    """Those of ``pids`` still running."""
    known = parents()
    return [p for p in pids if p in known]
