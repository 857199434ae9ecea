"""An independent reference model of SPEC §3 (and the §5 patch), written for the tests.

Deliberately shaped differently from ``domain/``: versions are plain dicts in a list and every rule
is spelled out inline, straight from the table in SPEC §3, so a shared bug is unlikely.
"""

from __future__ import annotations

from typing import Any

OPEN = {"active", "contested", "alternative"}


class RefCell:
    def __init__(self) -> None:
        self.vs: list[dict[str, Any]] = []

    # views
    def head(self) -> dict[str, Any] | None:
        heads = [v for v in self.vs if v["status"] in ("active", "contested")]
        assert len(heads) <= 1, "functional-key invariant"
        return heads[0] if heads else None

    def alts(self) -> list[dict[str, Any]]:
        return [v for v in self.vs if v["status"] == "alternative"]

    def view(self) -> tuple[str | None, str, list[str]]:
        h = self.head()
        if h is None:
            return None, "empty", []
        return h["value"], h["status"], sorted(a["value"] for a in self.alts())

    def open_with(self, value: str) -> dict[str, Any] | None:
        return next((v for v in self.vs if v["status"] in OPEN and v["value"] == value), None)

    # rules
    def _add(self, value: str, status: str, trust: int, prev: dict[str, Any] | None = None) -> None:
        self.vs.append({"value": value, "status": status, "trust": trust, "prev": prev})

    def _retract(self, h: dict[str, Any], status: str) -> None:
        h["status"] = status
        alts = self.alts()
        if alts:
            alts[-1]["status"] = "contested" if len(alts) > 1 else "active"
            return
        p = h["prev"]
        while p is not None and p["status"] != "superseded":
            p = p["prev"]
        if p is not None:
            p["status"] = "active"

    def apply(self, op: str, value: str | None, trust: int, *, old_value: str | None = None,
              correction: bool = False, hard_commit: bool = False) -> tuple[bool, str]:
        """Returns (applied, effective op)."""
        h = self.head()
        if op == "revise":
            if old_value is not None and not hard_commit and (h is None or h["value"] != old_value):
                return False, "noop"
            op = "accept" if h is None else "support" if value == h["value"] else (
                "reject" if correction else "accept")
        low = h is not None and trust < h["trust"]
        # Edition 2: an observation never closes an open version of higher trust.
        closes_all = h is not None and value is not None and value != h["value"] and op in ("accept", "reject")
        if closes_all and any(a["trust"] > trust for a in self.alts()):
            op = "contest"
        if low and value is not None and (op == "reject" or (op == "accept" and value != h["value"])):
            op = "contest"
        if op == "accept":
            assert value is not None
            if h is None:
                self._add(value, "active", trust)
                return True, "accept"
            if h["value"] == value:
                h["trust"] = max(h["trust"], trust)
                return True, "support"
            for a in self.alts():
                a["status"] = "superseded"
            h["status"] = "superseded"
            self._add(value, "active", trust, prev=h)
            return True, "accept"
        if op == "contest":
            assert value is not None
            if h is None:
                return False, "noop"
            same = self.open_with(value)
            if same is not None:
                same["trust"] = max(same["trust"], trust)
                return True, "support"
            h["status"] = "contested"
            self._add(value, "alternative", trust)
            return True, "contest"
        if op == "reject":
            if h is None:
                return False, "noop"
            if value is None:
                if low:
                    return False, "noop"
                self._retract(h, "contradicted")
                return True, "reject"
            if value == h["value"]:
                return False, "noop"
            for a in self.alts():
                a["status"] = "superseded"
            h["status"] = "contradicted"
            self._add(value, "active", trust, prev=h)
            return True, "reject"
        if op == "revoke":
            if h is None:
                return False, "noop"
            t = h if value is None else self.open_with(value)
            if t is None:
                return False, "noop"
            if t is h:
                if low:
                    return False, "noop"
                self._retract(h, "revoked")
                return True, "revoke"
            if t["trust"] > trust:
                return False, "noop"
            t["status"] = "revoked"
            if not self.alts():
                h["status"] = "active"
            return True, "revoke"
        if op == "resolve":
            if h is None or h["status"] != "contested":
                return False, "noop"
            assert value is not None
            w = self.open_with(value)
            if w is None:
                return False, "noop"
            if w is not h and low:
                return False, "noop"
            if any(v["trust"] > trust for v in self.vs if v["status"] in OPEN and v is not w):
                return False, "noop"
            for v in self.vs:
                if v["status"] in OPEN:
                    v["status"] = "contradicted"
            w["status"] = "active"
            return True, "resolve"
        if op == "support":
            t = h if value is None else self.open_with(value)
            if t is None:
                return False, "noop"
            t["trust"] = max(t["trust"], trust)
            return True, "support"
        raise ValueError(op)


class RefStore:
    """Many cells keyed by normalised key, plus the per-event history needed for as-of checks."""

    def __init__(self) -> None:
        self.cells: dict[str, RefCell] = {}

    def apply(self, key: str, op: str, value: str | None, trust: int, **patch: Any) -> tuple[bool, str]:
        return self.cells.setdefault(key, RefCell()).apply(op, value, trust, **patch)

    def frontier(self) -> dict[str, tuple[str | None, str, list[str]]]:
        return {k: c.view() for k, c in self.cells.items() if c.head() is not None}
