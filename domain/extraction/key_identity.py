"""Soft key identity, the pure part (docs/ingest.md): when two key names mean the same slot, and how a merge is kept.

Embedding similarity only shortlists (adapters/soft_keys.py); a pair is merged after a same/different
check shown only the two key names. Without a model that check is :func:`same_key`: token sets after
normalisation and a small synonym table (``pb`` = ``personal best``, ``5k`` = ``5 km``, ...). Keys
about a subject (``france.capital``) only ever match keys about the same subject.

A merge is an ordinary event: ``accept`` on the system cell ``_alias.<alias key>`` with the canonical
key as its value; an un-merge is a ``revoke`` of that cell, which empties it, so later operations on
the alias key go to its own cell again. No user key can name such a cell (normalisation strips a
leading ``_``), and the log keeps every merge and un-merge with its evidence.
"""

from __future__ import annotations

import re

ALIAS_PREFIX = "_alias."
SAME_OVERLAP = 0.8  # Jaccard of token sets; 0.75 would merge marathon_pb with half_marathon_pb

SYNONYMS: tuple[tuple[str, str], ...] = (
    (r"\bpersonal (?:record|best)\b|\bpb\b|\bpr\b", "personal best"),
    (r"\b(\d+(?:\.\d+)?) ?(?:k|km|kms|kilometers?|kilometres?)\b", r"\1 km"),
    (r"\b(\d+(?:\.\d+)?) ?(?:mi|miles?)\b", r"\1 mile"),
    (r"\bhome ?town\b|\bcity of residence\b|\bresidence city\b", "home city"),
    (r"\bdate of birth\b|\bdob\b|\bbirth ?day\b", "birth date"),
    (r"\bplace of birth\b|\bbirth ?place\b", "birth place"),
    (r"\b(?:tele)?phone(?: number)?\b|\bmobile(?: number)?\b|\bcell ?phone\b|\btel\b", "phone"),
    (r"\be ?mail(?: address)?\b", "email"),
    (r"\bfav(?:ou?rite)?\b", "favorite"),
    (r"\bcolou?r\b", "color"),
    (r"\bjob(?: title)?\b|\boccupation\b|\bprofession\b", "occupation"),
    (r"\bpartner\b|\bspouse\b|\bwife\b|\bhusband\b", "spouse"),
    (r"\bhome address\b", "address"),
    (r"\bvehicle\b", "car"),
    (r"\bcapital city\b", "capital"),
    (r"\bmusic band\b", "band"),
)
"""Phrase -> canonical words, applied in order to a key's words (both the check and the shortlist use it)."""
_COMPILED = tuple((re.compile(p), r) for p, r in SYNONYMS)
STOPWORDS = frozenset({"my", "the", "a", "an", "of", "over", "for", "in", "at", "on", "to", "user", "current",
                       "usual", "s", "is"})


def _stem(token: str) -> str:
    return token[:-1] if len(token) > 3 and token.endswith("s") and not token.endswith("ss") else token


def key_text(key: str) -> str:
    """The words of a key, as embedded and compared (``user.5k_pb`` -> ``5k pb``; no boilerplate prefix)."""
    words = key.replace("_", " ").replace(".", " ").split()
    if words and words[0] == "user":
        words = words[1:]
    return " ".join(words)


def key_phrase(key: str) -> str:
    """A key's words with synonyms folded and stop words dropped: what the shortlist embeds."""
    text = key_text(key.lower())
    for pattern, repl in _COMPILED:
        text = pattern.sub(repl, text)
    return " ".join(_stem(t) for t in text.split() if t not in STOPWORDS)


def key_tokens(key: str) -> frozenset[str]:
    """The tokens of :func:`key_phrase`, for the deterministic check."""
    return frozenset(key_phrase(key).split())


def _subject(key: str) -> str | None:
    """The subject part of ``<subject>.<attribute>``, or None for a key about the user."""
    head, dot, _ = key.partition(".")
    return head if dot and head != "user" else None


def settled_without_judge(a: str, b: str) -> tuple[bool, str] | None:
    """The verdicts no judge may overturn: keys about different subjects never merge, and keys whose
    normalised tokens are identical always do. None when a judge (a model, or :func:`same_key`) must decide."""
    if _subject(a) != _subject(b):
        return False, "different subjects"
    subject = _subject(a)
    if subject is not None:
        a, b = a[len(subject) + 1:], b[len(subject) + 1:]
    ta = key_tokens(a)
    if ta and ta == key_tokens(b):
        return True, "identical after normalisation and synonyms"
    return None


def same_key(a: str, b: str) -> tuple[bool, str]:
    """The deterministic same/different check on two key names (never their values), with why."""
    subject = _subject(a)
    if subject != _subject(b):
        return False, "different subjects"
    if subject is not None:  # the shared subject would inflate the overlap: compare the attributes
        a, b = a[len(subject) + 1:], b[len(subject) + 1:]
    ta, tb = key_tokens(a), key_tokens(b)
    if not ta or not tb:
        return False, "no tokens to compare"
    if {t for t in ta if t[0].isdigit()} != {t for t in tb if t[0].isdigit()}:
        return False, "different numbers"
    overlap = len(ta & tb) / len(ta | tb)
    if overlap >= SAME_OVERLAP:
        return True, f"token overlap {overlap:.2f} after synonyms"
    return False, f"token overlap {overlap:.2f} after synonyms is below {SAME_OVERLAP}"


def shortlist_phrase(key: str) -> tuple[str | None, str]:
    """The key's subject (None for a key about the user) and the phrase the shortlist embeds.

    Only keys with the same subject can merge, so the shortlist compares within a subject and embeds
    the attribute alone: a few dozen relation phrases then serve every subject from the cache."""
    subject = _subject(key)
    attribute = key if subject is None else key[len(subject) + 1:]
    return subject, key_phrase(attribute) or attribute


def alias_key(key: str) -> str:
    """The system cell whose head, when present, routes ``key`` to its canonical key."""
    return ALIAS_PREFIX + key


def is_system_key(key: str) -> bool:
    """Keys starting with ``_`` are P-Mem's own cells (aliases, extraction failures), never a user's."""
    return key.startswith("_")
