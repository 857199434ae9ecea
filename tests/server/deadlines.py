"""A request deadline that passes on cue, for the tests of work stopped between its stages."""

from __future__ import annotations

from pmem.adapters.servers.limits import Deadline


class PassesAfterTheFirstCheck(Deadline):
    """A deadline met at its first check (a batch or a catch-up starting) and passed at every later one."""

    def __init__(self) -> None:
        super().__init__(60)
        self.checks = 0

    def check(self, what: str) -> None:
        self.checks += 1
        if self.checks > 1:
            self.at = 0
        super().check(what)
