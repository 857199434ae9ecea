"""Soft key identity at ingest (docs/ingest.md): shortlist registered keys by embedding, confirm, merge as an event.

For a key the namespace has not seen, the registered keys about the same subject (keys about the user
form one group) whose phrase embeddings (:func:`domain.extraction.key_identity.shortlist_phrase`) have
cosine >= ``threshold`` (default 0.72, a setting) are candidates, best first. The rules of
:func:`~domain.extraction.key_identity.settled_without_judge` decide first (a key never merges with a
key it qualifies); what they leave open goes to a judge shown only the two key names: the LLM when one
is configured, else the deterministic :func:`~domain.extraction.key_identity.same_key`. A confirmed
pair is written as an ``accept`` on ``_alias.<new key>`` whose value is the canonical key, and the fact
goes to the canonical cell; later facts with that key follow the alias. The receipt says why a key was
merged, or why the nearest candidate above the threshold was not. :func:`unmerge` points the alias at
the key itself (a second ``accept`` on the same alias cell, superseding the merge), so operations after
it go to the key's own cell and the pair is not merged again; events already written stay where they are.

``scope``: ``free-form`` (what ``--soft-keys auto`` gives) checks only facts whose key was worded freely
(:func:`~domain.extraction.key_identity.free_form`: first-person and attribute statements, LLM facts); ``all`` checks
every fact. The registry is read from the store on first use, so an ingest with nothing to check
loads neither the frontier nor the embedder.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from pmem.adapters.service.store import Store
from pmem.domain.extraction.key_identity import (
    ALIAS_PREFIX,
    alias_key,
    free_form,
    is_system_key,
    same_key,
    settled_without_judge,
    shortlist_phrase,
)
from pmem.domain.operations import Evidence, Operation
from pmem.domain.views import Receipt
from pmem.projections.ports import Embedder

DEFAULT_THRESHOLD = 0.72
SHOWN = 3  # neighbour keys listed on a receipt
SCOPES = ("free-form", "all")

Judge = Callable[[str, str], tuple[bool, str]]
"""Same slot or not, from the two key names only, with why."""


@dataclass(frozen=True)
class Resolution:
    """Where a fact's key goes, which registered keys were compared, and the merge event to write, if any."""

    key: str
    via: str  # exact | alias | merged | new | own (un-merged)
    candidates: tuple[tuple[str, float], ...] = ()
    merge: Operation | None = None
    why: str | None = None

    def receipt_fields(self) -> dict[str, object]:
        d: dict[str, object] = {"identity": self.via,
                                "candidates": [{"key": k, "score": round(s, 4)} for k, s in self.candidates]}
        if self.why:
            d["identity_reason"] = self.why
        return d


@dataclass
class _Group:
    """The registered keys of one subject with their phrase vectors (rows of a matrix grown by doubling)."""

    dim: int
    keys: list[str] = field(default_factory=list)
    matrix: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.matrix = np.zeros((4, self.dim), dtype=np.float32)

    def add(self, key: str, vector: np.ndarray) -> None:
        if len(self.keys) == len(self.matrix):
            grown = np.zeros((2 * len(self.matrix), self.dim), dtype=np.float32)
            grown[:len(self.keys)] = self.matrix
            self.matrix = grown
        self.matrix[len(self.keys)] = vector
        self.keys.append(key)

    def nearest(self, vector: np.ndarray, k: int) -> tuple[tuple[str, float], ...]:
        scores = self.matrix[:len(self.keys)] @ vector
        order = np.argsort(-scores)[:k]
        return tuple((self.keys[i], float(scores[i])) for i in order)


class KeyIdentity:
    """The namespace's key registry: registered keys with their embeddings, and the aliases in force."""

    def __init__(self, store: Store, embedder: Embedder, *, threshold: float = DEFAULT_THRESHOLD,
                 judge: Judge = same_key, scope: str = "all") -> None:
        if scope not in SCOPES:
            raise ValueError(f"scope must be one of {SCOPES}, got {scope!r}")
        self.store = store
        self.embedder = embedder
        self.threshold = threshold
        self.judge = judge
        self.scope = scope
        self._loaded = False
        self.aliases: dict[str, str] = {}
        self.registered: set[str] = set()
        self._groups: dict[str | None, _Group] = {}
        self._vectors: dict[str, np.ndarray] = {}  # phrase -> unit vector
        self.merges = 0

    def load(self) -> KeyIdentity:
        """Read the registered keys and the aliases in force from the store's frontier (system cells included)."""
        self._loaded = True
        keys: list[str] = []
        for cell in self.store.frontier(system=True):
            if cell.key.startswith(ALIAS_PREFIX) and cell.value is not None:
                self.aliases[cell.key[len(ALIAS_PREFIX):]] = cell.value
            elif not is_system_key(cell.key):
                keys.append(cell.key)
        self.prepare(keys)
        for key in keys:
            self._register(key)
        return self

    def covers(self, form: str) -> bool:
        """Whether a fact of extractor form ``form`` goes through soft identity (see ``scope``)."""
        return self.scope == "all" or free_form(form)

    def prepare(self, keys: Iterable[str]) -> None:
        """Embed, in one batch, the phrases not embedded yet (the embedder's cache skips known texts)."""
        if not self._loaded:
            self.load()
        phrases = sorted({shortlist_phrase(k)[1] for k in keys if k not in self.registered} - self._vectors.keys())
        if phrases:
            self._vectors.update(zip(phrases, self.embedder.embed(phrases), strict=True))

    def resolve(self, key: str) -> Resolution:
        """Where ``key`` goes: its own registered cell, its alias, a newly merged canonical key, or a new cell."""
        if not self._loaded:
            self.load()
        if key in self.registered:
            return Resolution(key, "exact")
        if key in self.aliases:
            target = self.aliases[key]
            if target == key:  # un-merged: its own key from now on, never shortlisted again
                self._register(key)
                return Resolution(key, "own", why="un-merged: kept as its own key")
            return Resolution(target, "alias", why=f"alias of {target!r}")
        subject, phrase = shortlist_phrase(key)
        group = self._groups.get(subject)
        shown = group.nearest(self._vector(phrase), SHOWN) if group is not None else ()
        refused: str | None = None
        for candidate, score in shown:
            if score < self.threshold:
                break
            settled = settled_without_judge(key, candidate)  # the rules bind every judge
            same, why = settled if settled is not None else self.judge(key, candidate)
            if same:
                self.aliases[key] = candidate
                self.merges += 1
                return Resolution(candidate, "merged", shown, self._merge_op(key, candidate, score, why),
                                  f"merged into {candidate}: cosine {score:.2f}, {why}")
            if refused is None:
                refused = f"not merged into {candidate}: cosine {score:.2f}, {why}"
        self._register(key)
        return Resolution(key, "new", shown, why=refused)

    def _vector(self, phrase: str) -> np.ndarray:
        if phrase not in self._vectors:
            self._vectors[phrase] = self.embedder.embed([phrase])[0]
        return self._vectors[phrase]

    def _register(self, key: str) -> None:
        if key in self.registered:
            return
        subject, phrase = shortlist_phrase(key)
        self._groups.setdefault(subject, _Group(self.embedder.dim)).add(key, self._vector(phrase))
        self.registered.add(key)

    def _merge_op(self, key: str, canonical: str, score: float, why: str) -> Operation:
        text = f"soft key identity: {key!r} is {canonical!r} (cosine {score:.3f}, threshold {self.threshold}; {why})"
        return Operation("accept", self.store.namespace, alias_key(key), value=canonical,
                         evidence=Evidence(text=text, source="soft-key-identity"))


def unmerge(store: Store, key: str, *, source: str = "unmerge", text: str | None = None) -> Receipt:
    """Point ``key``'s alias at ``key`` itself: operations after this go to its own cell, and it is not
    shortlisted again. Nothing already written moves. Revoking this event would reinstate the merge."""
    evidence = Evidence(text=text or f"un-merge {key!r}: its own key from now on", source=source)
    return store.apply([Operation("accept", store.namespace, alias_key(key), value=key, evidence=evidence)])[0]
