"""The state of one cell and the transitions events apply to it (docs/concepts.md).

Transitions never fail on a valid log and never decide anything: the deciding happens in
:mod:`domain.decide`. Each transition returns the ids of the versions whose status changed, so a
projection can track open intervals without re-deriving the rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ACTIVE, CONTESTED, ALTERNATIVE = "active", "contested", "alternative"
SUPERSEDED, CONTRADICTED, REVOKED = "superseded", "contradicted", "revoked"
FORGOTTEN = "forgotten"  # the status an open version closes with when its cell is forgotten
OPEN = frozenset({ACTIVE, CONTESTED, ALTERNATIVE})
STATUSES = (ACTIVE, CONTESTED, ALTERNATIVE, SUPERSEDED, CONTRADICTED, REVOKED, FORGOTTEN)
# What a forgotten cell's values, evidence texts, sources and reasons read as, wherever they were
# (docs/forgetting.md): the data key that sealed them is gone, so no reader can know more.
FORGOTTEN_TEXT = "<forgotten>"


@dataclass(slots=True)
class Version:
    """One value a cell has held or been offered, with its provenance."""

    vid: int
    value: str
    status: str
    created_at: int  # the cell revision (aggregate version) of the event that created it
    trust: int  # highest trust among its evidence
    supersedes: int | None = None
    alternative_of: int | None = None
    support: int = 0
    evidence: list[int] = field(default_factory=list)  # cell revisions of supporting events
    sources: list[str] = field(default_factory=list)
    node_type: str | None = None  # graph node type supplied by the newest evidence that gave one

    def add_evidence(self, revision: int, trust: int, source: str | None) -> None:
        self.evidence.append(revision)
        if trust > self.trust:
            self.trust = trust
        if source is not None and source not in self.sources:
            self.sources.append(source)


@dataclass(slots=True)
class CellState:
    """Versions of one cell. At most one version is ``active``/``contested`` (the head)."""

    namespace: str
    key: str
    versions: list[Version] = field(default_factory=list)
    head_vid: int | None = None
    alternative_vids: list[int] = field(default_factory=list)  # open alternatives, oldest first
    forgotten_at: int | None = None  # the cell revision of the last ``Forgotten`` event, if any

    # -- views ---------------------------------------------------------------
    @property
    def head(self) -> Version | None:
        return None if self.head_vid is None else self.versions[self.head_vid]

    @property
    def status(self) -> str:
        h = self.head
        return "empty" if h is None else h.status

    def alternatives(self) -> list[Version]:
        return [self.versions[v] for v in self.alternative_vids]

    def find_open(self, value: str) -> Version | None:
        h = self.head
        if h is not None and h.value == value:
            return h
        for vid in self.alternative_vids:
            if self.versions[vid].value == value:
                return self.versions[vid]
        return None

    # -- the compact form ----------------------------------------------------
    def packed(self) -> tuple[Any, ...]:
        """This state as nested tuples of plain values (a fifth of its objects' memory once marshalled):
        what a streamed batch keeps of a cell between chunks (docs/decisions.md). :meth:`unpacked`
        gives back an equal state."""
        return (self.namespace, self.key, self.head_vid, tuple(self.alternative_vids), self.forgotten_at,
                tuple((v.vid, v.value, v.status, v.created_at, v.trust, v.supersedes, v.alternative_of, v.support,
                       tuple(v.evidence), tuple(v.sources), v.node_type) for v in self.versions))

    @classmethod
    def unpacked(cls, packed: tuple[Any, ...]) -> CellState:
        namespace, key, head_vid, alternative_vids, forgotten_at, versions = packed
        return cls(namespace, key,
                   [Version(vid, value, status, created_at, trust, supersedes, alternative_of, support, list(evidence),
                            list(sources), node_type)
                    for vid, value, status, created_at, trust, supersedes, alternative_of, support, evidence, sources,
                    node_type in versions],
                   head_vid, list(alternative_vids), forgotten_at)

    # -- transitions ---------------------------------------------------------
    def note_node_type(self, vid: int | None, node_type: str | None) -> None:
        """Evidence for version ``vid`` supplied a graph node type: the newest one supplied holds."""
        if node_type is not None and vid is not None:
            self.versions[vid].node_type = node_type

    def _new_version(self, value: str, status: str, revision: int, trust: int, source: str | None,
                     supersedes: int | None = None, alternative_of: int | None = None) -> Version:
        # as add_evidence(revision, trust, source) on an empty version would leave it, built at once
        v = Version(len(self.versions), value, status, revision, trust, supersedes, alternative_of, 0, [revision],
                    [] if source is None else [source])
        self.versions.append(v)
        return v

    def _close_alternatives(self, status: str) -> list[int]:
        closed = self.alternative_vids
        for vid in closed:
            self.versions[vid].status = status
        self.alternative_vids = []
        return closed

    def commit_head(self, value: str, revision: int, trust: int, source: str | None,
                    displaced_status: str) -> list[int]:
        """``accept``/``reject v``: the value becomes head, the old head is displaced."""
        changed = self._close_alternatives(SUPERSEDED)
        old = self.head
        if old is not None:
            old.status = displaced_status
            changed.append(old.vid)
        v = self._new_version(value, ACTIVE, revision, trust, source,
                              supersedes=None if old is None else old.vid)
        self.head_vid = v.vid
        changed.append(v.vid)
        return changed

    def add_alternative(self, value: str, revision: int, trust: int, source: str | None) -> list[int]:
        head = self.head
        assert head is not None
        head.status = CONTESTED
        v = self._new_version(value, ALTERNATIVE, revision, trust, source, alternative_of=head.vid)
        self.alternative_vids.append(v.vid)
        return [head.vid, v.vid]

    def add_support(self, vid: int, revision: int, trust: int, source: str | None) -> list[int]:
        v = self.versions[vid]
        v.support += 1
        v.add_evidence(revision, trust, source)
        return []

    def rollback(self, retracted_status: str) -> list[int]:
        """Retract the head (docs/concepts.md): promote the newest alternative, else walk ``supersedes``."""
        head = self.head
        assert head is not None
        head.status = retracted_status
        changed = [head.vid]
        if self.alternative_vids:
            promoted = self.versions[self.alternative_vids.pop()]
            promoted.status = CONTESTED if self.alternative_vids else ACTIVE
            self.head_vid = promoted.vid
            changed.append(promoted.vid)
            return changed
        self.head_vid = None
        p = head.supersedes
        while p is not None:
            prev = self.versions[p]
            if prev.status == SUPERSEDED:
                prev.status = ACTIVE
                self.head_vid = prev.vid
                changed.append(prev.vid)
                break
            p = prev.supersedes
        return changed

    def forget(self, revision: int) -> list[int]:
        """``forget``: every value and source reads :data:`FORGOTTEN_TEXT`, the open versions close
        with status ``forgotten`` and the cell is empty. Every version is reported changed (its value
        did); the supersedes chain and the statuses of closed versions are kept."""
        for v in self.versions:
            if v.status in OPEN:
                v.status = FORGOTTEN
            v.value = FORGOTTEN_TEXT
            v.sources = [FORGOTTEN_TEXT] if v.sources else []
        self.head_vid = None
        self.alternative_vids = []
        self.forgotten_at = revision
        return [v.vid for v in self.versions]

    def revoke_alternative(self, vid: int) -> list[int]:
        self.alternative_vids.remove(vid)
        self.versions[vid].status = REVOKED
        changed = [vid]
        if not self.alternative_vids:
            head = self.head
            assert head is not None
            head.status = ACTIVE
            changed.append(head.vid)
        return changed

    def resolve(self, vid: int) -> list[int]:
        changed = []
        for other in [self.head_vid, *self.alternative_vids]:
            if other is not None and other != vid:
                self.versions[other].status = CONTRADICTED
                changed.append(other)
        self.versions[vid].status = ACTIVE
        self.head_vid = vid
        self.alternative_vids = []
        changed.append(vid)
        return changed
