"""The lexical channel's pure part (docs/search.md): words, the documents a version is indexed as, the
terms a query keeps, and the subject a key names.

Words are runs of letters and digits of any script, after NFKD, with combining marks dropped and case
folded (``Café`` and ``cafe`` are one word), so ``_`` and ``.`` separate them: the key
``toilet.location`` is the words ``toilet location``. Both backends index text already cut into
words by :func:`words` (SQLite FTS5 and PostgreSQL ``to_tsvector('simple', ...)`` then only split on
spaces), so the two agree on what a word is.

A version is indexed as one document per event that gave it evidence: the event that created it
(key words, value, the event's text) and each ``support`` or ``resolve`` that carried a text. A
document counts for a search as of N only once its event is at most N, and only while its version is
open at N (the vector projection's open intervals decide that, see :mod:`pmem.adapters.search.hybrid`).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

from pmem.domain.state import FORGOTTEN_TEXT

if TYPE_CHECKING:  # domain.cell imports eventsourcing: reading the tables does not need it
    from pmem.domain.cell import CellEvent

NAME = "lexical"
SCHEMA_VERSION = 2  # 2: the namespace's word and document count (SQLite)
_WORD = re.compile(r"[^\W_]+")
CREATES = ("accept", "contest", "reject")  # events whose ``vid`` is a new version (reject: when it has a value)
EVIDENCE = ("support", "resolve")  # events whose text is further evidence of their ``target`` version
STOPWORDS = frozenset("""
a about am an and any are as at be been being but by can could did do does doing for from had has have
having he her here hers him his how i if in into is it its just me mine my myself now of on or our ours
please she should so some tell than that the their theirs them then there these they this those to
up us was we were what whats when where which while who whom whose why will with would you your yours
s t d ll m re ve currently current today still
""".split())
COMMON_SHARE = 0.2  # a query term in more than this share of all documents ...
COMMON_MIN = 2_000  # ... and in more than this many is left out of the lexical query
MAX_TERMS = 16  # the rarest terms a lexical query keeps
# The documents a lexical query may hold, summed over its terms: the index scores every document a term
# is in, so past this the rarer terms are kept and the commoner ones left to the vector channel (a few
# relation words of a large store hold tens of thousands of documents: docs/search.md).
POSTINGS_BUDGET = 8_000


def words(text: str) -> list[str]:
    """The words of ``text``: letters and digits of any script, marks dropped, case folded."""
    if text.isascii():  # no marks to drop, and NFKD leaves ASCII as it is: most texts, at a tenth of the cost
        return _WORD.findall(text.casefold())
    folded = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return _WORD.findall(folded.casefold())


@lru_cache(maxsize=1 << 16)
def subject_words(key: str) -> tuple[str, ...]:
    """The words of a key's subject: the part before the first ``.`` (the whole key without one); kept
    for the last 65,536 keys asked (a search asks for each candidate's)."""
    return tuple(words(key.partition(".")[0]))


class Phrases:
    """The runs of adjacent words in a question, by length, so each subject is looked up once: a search
    asks for every candidate's subject, and a long question times hundreds of candidates was most of a
    search's work when each one scanned the question."""

    def __init__(self, question: Sequence[str]) -> None:
        self.question = tuple(question)
        self._runs: dict[int, set[tuple[str, ...]]] = {}

    def names(self, subject: Sequence[str]) -> bool:
        """Whether the question's words hold the subject's words, in order and next to each other. A
        subject of stopwords alone (``my``, ``it``) is never named."""
        n = len(subject)
        if n == 0 or all(w in STOPWORDS for w in subject):
            return False
        runs = self._runs.get(n)
        if runs is None:
            q = self.question
            runs = self._runs[n] = {q[i:i + n] for i in range(len(q) - n + 1)}
        return tuple(subject) in runs


def names_subject(question: Sequence[str], subject: Sequence[str]) -> bool:
    """:meth:`Phrases.names` for one subject."""
    return Phrases(question).names(subject)


def query_terms(query: str) -> list[str]:
    """The distinct words of a query that are not stopwords, in order (all of them when every word is
    a stopword, so that ``who is it`` still asks for something)."""
    found = list(dict.fromkeys(words(query)))
    kept = [w for w in found if w not in STOPWORDS]
    return kept or found


def idf(df: int, total: int) -> float:
    """BM25's inverse document frequency (always positive)."""
    return math.log(1.0 + (total - df + 0.5) / (df + 0.5))


def chosen_terms(terms: Iterable[str], df: Mapping[str, int], total: int) -> list[str]:
    """The terms worth asking the index for: those some document holds, without the common ones (in more
    than :data:`COMMON_SHARE` of the documents and more than :data:`COMMON_MIN`: they rank nothing and
    would make the index score most of its documents), at most :data:`MAX_TERMS`, rarest first, and no
    more than fit in :data:`POSTINGS_BUDGET` documents together. When every term is common, or the rarest
    alone passes the budget, the rarest one alone."""
    present = sorted((df.get(t, 0), t) for t in set(terms) if df.get(t, 0) > 0)
    limit = max(COMMON_MIN, COMMON_SHARE * total)
    kept: list[str] = []
    postings = 0
    for d, t in present:
        if d > limit or len(kept) == MAX_TERMS or postings + d > POSTINGS_BUDGET:
            break
        kept.append(t)
        postings += d
    return kept if kept else [t for _, t in present[:1]]


@dataclass(frozen=True, slots=True)
class Doc:
    """One document: the evidence one event gave one version, cut into words per field."""

    cell: str  # cell id, hex
    vid: int
    event_index: int
    namespace: str
    keywords: str
    value: str
    evidence: str

    def terms(self) -> set[str]:
        return {*self.keywords.split(), *self.value.split(), *self.evidence.split()}


def doc(cell: str, vid: int, event_index: int, namespace: str, key: str, value: str, text: str | None) -> Doc:
    return Doc(cell, vid, event_index, namespace, " ".join(words(key)), " ".join(words(value)),
               " ".join(words(text or "")))


@dataclass(slots=True)
class LexicalProjector:
    """Events -> new versions (numbered in creation order from ``next_id``, as the vector projection
    numbers them) and documents. No cell state is needed: a creating event carries its version's vid,
    an evidence event its target's."""

    next_id: int = 0
    versions: list[tuple[int, str, int, str, str]] = field(default_factory=list)  # id, cell, vid, namespace, key
    docs: list[Doc] = field(default_factory=list)

    def apply(self, index: int, event: CellEvent) -> None:
        op, cell, ns, key = event.OP, event.originator_id.hex, event.namespace, event.key
        fields = event.__dict__  # the event's stored fields, as its transition reads them
        vid = fields.get("vid") if op in CREATES else None
        forgotten = event.value_or_none == FORGOTTEN_TEXT  # a forgotten cell's versions index nothing
        if vid is not None:
            self.versions.append((self.next_id, cell, vid, ns, key))
            self.next_id += 1
            if not forgotten:
                self.docs.append(doc(cell, vid, index, ns, key, event.value_or_none or "", event.text))
        elif op in EVIDENCE and event.text and not forgotten:
            self.docs.append(doc(cell, int(fields["target"]), index, ns, key, event.value_or_none or "", event.text))

    def flush(self) -> tuple[list[tuple[int, str, int, str, str]], list[Doc]]:
        out = self.versions, self.docs
        self.versions, self.docs = [], []
        return out

    def forget(self) -> None:
        self.versions, self.docs = [], []
