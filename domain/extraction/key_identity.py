"""Soft key identity, the pure part (docs/ingest.md): when two key names mean the same slot, and how a merge is kept.

Embedding similarity only shortlists (adapters/soft_keys.py); a pair is merged after a same/different
check shown only the two key names. The rules come first, and no judge may overturn what they settle
(:func:`settled_without_judge`):

- keys about different subjects (``france.capital`` / ``germany.capital``) never merge;
- keys with the same words after normalisation always merge. Normalising folds spelling and a small
  synonym table (``favourite colour`` = ``favorite color``, ``automobile`` = ``car``, ``per day`` =
  ``daily``, ``pb`` = ``personal best``, ``5k`` = ``5 km``, ...), drops stop words and a plural ``s``,
  and turns ``Y of X`` into ``X's Y``; word order is free (``dentist appointment`` = ``appointment with
  the dentist``) unless a possessive fixes it;
- a key never merges with a key it qualifies or that qualifies it: when one key's words are a strict
  part of the other's (``manager's manager`` / ``manager``, ``morning run`` / ``run``, ``sister's
  birthday`` / ``birthday``), when the numbers differ (``10k pb`` / ``5k pb``), when the keys differ by
  a contrastive qualifier (``morning``/``evening``, ``work``/``personal``, ``sister``/``brother``,
  ``daily``/``weekly``, ...), or when a possessive runs the other way (``dog's owner`` / ``owner's dog``).

What the rules leave open goes to the judge: a model when one is configured, else :func:`same_key`,
which refuses (different words with no synonym between them are not evidence of the same slot).

A merge is an ordinary event: ``accept`` on the system cell ``_alias.<alias key>`` with the canonical
key as its value; an un-merge points the alias at the key itself. No user key can name such a cell
(normalisation strips a leading ``_``), and the log keeps every merge and un-merge with its evidence.
"""

from __future__ import annotations

import re
from collections import Counter

ALIAS_PREFIX = "_alias."

SYNONYMS: tuple[tuple[str, str], ...] = (
    (r"\b(?:type|kind|sort) of\b", ""),
    (r"\bno\b|\bnum\b|\bnr\b|\bcount\b", "number"),
    (r"\bpersonal (?:record|best)\b|\bpb\b|\bpr\b", "personal best"),
    (r"\b(\d+(?:\.\d+)?) ?(?:k|km|kms|kilometers?|kilometres?)\b", r"\1 km"),
    (r"\b(\d+(?:\.\d+)?) ?(?:mi|miles?)\b", r"\1 mile"),
    (r"\bhome ?town\b|\bcity of residence\b|\bresidence city\b", "home city"),
    (r"\bdate of birth\b|\bdob\b|\bbirth ?day\b", "birth date"),
    (r"\bplace of birth\b|\bbirth ?place\b", "birth place"),
    (r"\b(?:tele)?phone(?: number)?\b|\bmobile(?: number)?\b|\bcell ?phone\b|\btel\b", "phone"),
    (r"\be ?mail(?: address)?\b", "email"),
    (r"\bwi ?fi\b", "wifi"),
    (r"\bfav(?:ou?rite)?\b", "favorite"),
    (r"\bcolou?r\b", "color"),
    (r"\bjob(?: title)?\b|\boccupation\b|\bprofession\b", "occupation"),
    (r"\bpartner\b|\bspouse\b|\bwife\b|\bhusband\b", "spouse"),
    (r"\bmom\b|\bmum\b|\bmommy\b|\bmummy\b", "mother"),
    (r"\bdad\b|\bdaddy\b|\bpapa\b", "father"),
    (r"\bboss\b", "manager"),
    (r"\bphysician\b|\bgp\b", "doctor"),
    (r"\bhome address\b", "address"),
    (r"\bvehicle\b|\bautomobile\b", "car"),
    (r"\bfilm\b", "movie"),
    (r"\btelevision\b", "tv"),
    (r"\bbed time\b", "bedtime"),
    (r"\bper day\b|\beach day\b|\bevery day\b|\ba day\b", "daily"),
    (r"\bper week\b|\beach week\b|\bevery week\b|\ba week\b", "weekly"),
    (r"\bper month\b|\beach month\b|\bevery month\b|\ba month\b", "monthly"),
    (r"\bper year\b|\beach year\b|\bevery year\b|\ba year\b|\bannual(?:ly)?\b", "yearly"),
    (r"\bcapital city\b", "capital"),
    (r"\bmusic band\b", "band"),
)
"""Phrase -> canonical words, applied in order to a key's words (both the check and the shortlist use it)."""
_COMPILED = tuple((re.compile(p), r) for p, r in SYNONYMS)
STOPWORDS = frozenset({"my", "our", "your", "the", "a", "an", "over", "for", "in", "at", "on", "to", "with",
                       "user", "current", "usual", "i", "is"})
IDENTICAL = "identical after normalisation and synonyms"  # the reason of a merge the rules settle
POSSESSIVE = "s"  # what normalisation leaves of an apostrophe s (``manager's`` -> ``manager_s``)

CONTRASTS: tuple[frozenset[str], ...] = tuple(frozenset(g.split()) for g in (
    "morning afternoon evening night noon midnight",
    "daily weekly monthly yearly hourly weekday weekend",
    "monday tuesday wednesday thursday friday saturday sunday",
    "spring summer autumn fall winter",
    "breakfast brunch lunch dinner supper snack",
    "work personal home school office business family",
    "mother father sister brother son daughter parent child children sibling aunt uncle cousin niece "
    "nephew grandmother grandfather grandparent spouse friend colleague manager neighbour neighbor "
    "boyfriend girlfriend roommate doctor dentist",
    "first second third last previous next former ex old new future past",
    "min max minimum maximum lowest highest least most top bottom best worst",
    "left right front back upper lower inner outer north south east west",
    "start end finish begin beginning",
    "incoming outgoing",
    "km mile meter metre yard foot feet kg lb pound",
))
"""Words that, put in each other's place, name another slot: ``morning run`` is not ``evening run``.
A judge may not merge two keys that differ by two words of one group."""


def _stem(token: str) -> str:
    return token[:-1] if len(token) > 3 and token.endswith("s") and not token.endswith("ss") else token


def key_text(key: str) -> str:
    """The words of a key, as embedded and compared (``user.5k_pb`` -> ``5k pb``; no boilerplate prefix)."""
    words = key.replace("_", " ").replace(".", " ").split()
    if words and words[0] == "user":
        words = words[1:]
    return " ".join(words)


def _of_first(tokens: list[str]) -> list[str]:
    """``Y of X`` -> ``X 's Y`` (``birthday of my sister`` -> ``my sister 's birthday``), nested from the left."""
    if "of" not in tokens:
        return tokens
    i = tokens.index("of")
    head, tail = tokens[:i], _of_first(tokens[i + 1:])
    if not head or not tail:
        return head + tail
    return tail + [POSSESSIVE] + head


def key_words(key: str) -> tuple[tuple[str, ...], bool]:
    """A key's words after normalising (synonyms, ``of`` turned round, stop words and plural ``s``
    dropped), in order, and whether a possessive fixes that order."""
    text = key_text(key.lower())
    for pattern, repl in _COMPILED:
        text = pattern.sub(repl, text)
    tokens = _of_first(text.split())
    possessive = POSSESSIVE in tokens[1:-1]
    return tuple(_stem(t) for t in tokens if t not in STOPWORDS and t != POSSESSIVE), possessive


def key_phrase(key: str) -> str:
    """A key's normalised words (:func:`key_words`): what the shortlist embeds."""
    return " ".join(key_words(key)[0])


def key_tokens(key: str) -> frozenset[str]:
    """The distinct words of :func:`key_phrase`."""
    return frozenset(key_words(key)[0])


def _subject(key: str) -> str | None:
    """The subject part of ``<subject>.<attribute>``, or None for a key about the user."""
    head, dot, _ = key.partition(".")
    return head if dot and head != "user" else None


def _numbers(words: Counter[str]) -> set[str]:
    return {t for t in words if t[0].isdigit()}


def _contrast(only_a: Counter[str], only_b: Counter[str]) -> tuple[str, str] | None:
    for group in CONTRASTS:
        x = next((t for t in sorted(only_a) if t in group), None)
        y = next((t for t in sorted(only_b) if t in group), None)
        if x is not None and y is not None:
            return x, y
    return None


def settled_without_judge(a: str, b: str) -> tuple[bool, str] | None:
    """The verdicts no judge may overturn (the module docstring), with why; None when a judge (a model,
    or :func:`same_key`) must decide."""
    subject = _subject(a)
    if subject != _subject(b):
        return False, "different subjects"
    if subject is not None:  # compare the attributes
        a, b = a[len(subject) + 1:], b[len(subject) + 1:]
    (wa, pa), (wb, pb) = key_words(a), key_words(b)
    if not wa or not wb:
        return False, "no words to compare"
    ca, cb = Counter(wa), Counter(wb)
    if ca == cb:
        if wa != wb and (pa or pb):
            return False, f"a possessive runs the other way ({' '.join(wa)} / {' '.join(wb)})"
        return True, IDENTICAL
    if _numbers(ca) != _numbers(cb):
        return False, f"different numbers ({', '.join(sorted(_numbers(ca)))} / {', '.join(sorted(_numbers(cb)))})"
    only_a, only_b = ca - cb, cb - ca
    if not only_a or not only_b:  # one key's words are a strict part of the other's
        longer, shorter, extra = (a, b, only_a) if only_a else (b, a, only_b)
        kind = "possessive chain" if (pa if only_a else pb) else "qualifier"
        return False, f"{longer} qualifies {shorter} ({kind}: {' '.join(sorted(extra.elements()))})"
    contrast = _contrast(only_a, only_b)
    if contrast is not None:
        return False, f"contrastive qualifier ({contrast[0]} / {contrast[1]})"
    return None


def same_key(a: str, b: str) -> tuple[bool, str]:
    """The deterministic same/different check on two key names (never their values), with why: the
    rules' verdict, else different (words that differ with no synonym between them)."""
    settled = settled_without_judge(a, b)
    if settled is not None:
        return settled
    subject = _subject(a)
    if subject is not None:
        a, b = a[len(subject) + 1:], b[len(subject) + 1:]
    ca, cb = Counter(key_words(a)[0]), Counter(key_words(b)[0])
    return False, (f"different words ({' '.join(sorted((ca - cb).elements()))} / "
                   f"{' '.join(sorted((cb - ca).elements()))}) with no synonym between them")


def shortlist_phrase(key: str) -> tuple[str | None, str]:
    """The key's subject (None for a key about the user) and the phrase the shortlist embeds.

    Only keys with the same subject can merge, so the shortlist compares within a subject and embeds
    the attribute alone: a few dozen relation phrases then serve every subject from the cache."""
    subject = _subject(key)
    attribute = key if subject is None else key[len(subject) + 1:]
    return subject, key_phrase(attribute) or attribute


def free_form(form: str) -> bool:
    """Whether a fact of extractor form ``form`` has a free-form key, worded by whoever made the
    statement (a template's first-person ``statement`` or third-person ``attribute``, any LLM fact), which
    soft identity checks by default; the other template forms (``cloze:*``, ``alfworld.*``) name their
    relation themselves."""
    return form == "statement" or form.startswith(("llm", "attribute"))


def alias_key(key: str) -> str:
    """The system cell whose head, when present, routes ``key`` to its canonical key."""
    return ALIAS_PREFIX + key


def is_system_key(key: str) -> bool:
    """Keys starting with ``_`` are P-Mem's own cells (aliases, extraction failures), never a user's."""
    return key.startswith("_")
