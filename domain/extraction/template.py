"""The template extractor: fixed sentence forms -> facts, with no model and no I/O.

Forms, tried in this order on each record (a leading ``"<n>. "`` serial number is dropped first):

1. ALFWorld revision events, key ``<object>.location``:
   ``Earlier observation: {obj} was in {loc}.`` -> accept ``loc``;
   ``Update: {obj} has been moved from {a} to {b}.`` -> accept ``b`` (``a`` kept as ``previous``);
   ``The move of {obj} to {b} was reported in error.`` -> withdrawn, revoke ``b``.
2. Personal statements, key ``X``: ``my|the|our X is now Y`` -> accept ``Y``; ``... X is no longer Y``
   -> withdrawn, revoke ``Y``. A lead-in sets the status: hedges (``I think``, ``maybe``, ...) ->
   ``hedged`` (op hint ``contest``); ``<someone> says (that)`` / ``according to <someone>,`` ->
   ``reported``; correction cues (``Correction:``, ``Actually,``, ...) -> op hint ``reject``.
3. The 44 FactConsolidation cloze templates (:mod:`domain.extraction.cloze`), key
   ``<subject>.<relation>`` -> accept the object.
4. Third-person attribute statements about a named subject (one to four capitalised words), key
   ``<subject>.<attribute>``: ``X's A changed|updated [B] from "old" to "new"`` (quoted values; any
   trailing clause ignored) -> accept ``new`` under ``B`` if given, else ``A`` (``old`` kept as
   ``previous``); ``X's A is|was [now] V`` -> accept ``V`` when it reads as a value: the attribute at most
   four words with no preposition, the value at most six words, no clause (``, ``), not opening with a
   participle or a filler (``X's motivation is driven by ...``, ``X's dialogue was marked by ...``).

A record that fits none, or whose key or value comes out empty, yields no fact and says why.

Each fact carries its graph node type (docs/graph.md): an ALFWorld observation or move is an ``event``, a
personal statement is about the user's ``persona``, and a cloze fact has the rule-based type of its
relation (``spouse`` -> ``relationship``, ``place_of_birth`` -> ``event``, :mod:`domain.node_types`).

Dialogue turns (LoCoMo) go to :class:`DialogueTemplateExtractor` instead: only form 2, tried on each
sentence of the turn. Forms 1 and 3 describe structured streams; on free conversation the cloze
``The [X] is [Y]`` alone would turn chit-chat ("The photo is from a forest...") into facts.
"""

from __future__ import annotations

import re

from pmem.domain.extraction.cloze import match_cloze
from pmem.domain.extraction.facts import CONFIDENCE, Extraction, Fact, OpHint, Status, personal_key, subject_key
from pmem.domain.extraction.grounding import Utterance
from pmem.domain.node_types import default_node_type

_SERIAL = re.compile(r"(\d+)\.\s+(.*)", re.S)
_OBSERVED = re.compile(r"Earlier observation:\s*(?P<obj>.+?) was in (?P<loc>.+)", re.S | re.I)
_MOVED = re.compile(r"Update:\s*(?P<obj>.+?) has been moved from (?P<a>.+?) to (?P<b>.+)", re.S | re.I)
_RETRACTED = re.compile(r"The move of (?P<obj>.+?) to (?P<b>.+?) was reported in error", re.S | re.I)
_STATEMENT = re.compile(r"(?:my|the|our)\s+(?P<x>.+?)\s+(?:is|are)\s+(?P<neg>no longer|now)\s+(?P<y>.+)",
                        re.S | re.I)
_HEDGE = re.compile(r"(?:i think|i guess|i believe|maybe|perhaps|probably|possibly|i'm not sure,? but)\s*,?\s+",
                    re.I)
_REPORTED = re.compile(r"(?:(?:[\w.' -]{1,40}?)\s+(?:says|said|told me)(?:\s+that)?|according to [^,]{1,60},)\s+",
                       re.I)
_NAME = r"(?P<x>[A-Z][\w.-]*(?: [A-Z][\w.-]*){0,3})"
_QUOTE = "[\"'\u201c\u201d\u2018\u2019]"
_CHANGE = re.compile(_NAME + r"'s (?P<a>[\w -]{1,40}?) (?:has been |has |was |had )?(?:updated|changed)"
                     r"(?: (?P<b>[\w -]{1,40}?))? from " + _QUOTE + r"(?P<old>[^\"\u201c\u201d]+?)" + _QUOTE +
                     r" to " + _QUOTE + r"(?P<new>[^\"\u201c\u201d]+?)" + _QUOTE + r"(?:\W.*)?", re.S)
_POSSESSIVE = re.compile(_NAME + r"'s (?P<a>[a-z][\w -]{0,40}?) (?:is|was) (?:now )?(?P<v>.+)", re.S)
_NOT_ATTRIBUTE = frozenset("about at by for from in of on to with".split())
_NOT_VALUE = frozenset("a an being evident not one part the".split())  # "one of ...", "part of ...": a clause
_CORRECTION = re.compile(r"(?:correction\s*:|actually\s*,?|no\s*,\s*wait\s*,?|sorry\s*,|i was wrong\s*,)\s*", re.I)


def _sentence(text: str) -> str:
    """Trim the record and one final full stop (``Washington, D.C..`` keeps its own dot)."""
    s = text.strip()
    return s[:-1].rstrip() if s.endswith(".") else s


class TemplateExtractor:
    """Records -> facts by the fixed forms above. Deterministic and pure."""

    name = "template"

    def extract(self, text: str, record: int, said: Utterance | None = None) -> Extraction:
        """The facts of one record (1-based ``record`` number), or the reason there are none."""
        body = text.strip()
        if not body:
            return Extraction(record, text, reason="empty record")
        serial = _SERIAL.fullmatch(body)
        if serial is not None:
            body = serial.group(2)
        sentence = _sentence(body)
        for form in (self._alfworld, self._statement, self._cloze, self._attribute):
            found = form(sentence, record, text)
            if found is not None:
                return found
        return Extraction(record, text, reason="no template matched")

    # -- the forms -----------------------------------------------------------
    def _alfworld(self, s: str, record: int, text: str) -> Extraction | None:
        if m := _OBSERVED.fullmatch(s):
            return _fact(record, text, "alfworld.observation", subject_key(m["obj"], "location"), m["loc"],
                         "asserted", "accept", "event")
        if m := _MOVED.fullmatch(s):
            return _fact(record, text, "alfworld.move", subject_key(m["obj"], "location"), m["b"],
                         "asserted", "accept", "event", previous=m["a"].strip())
        if m := _RETRACTED.fullmatch(s):
            return _fact(record, text, "alfworld.retraction", subject_key(m["obj"], "location"), m["b"],
                         "withdrawn", "revoke", "event")
        return None

    def _statement(self, s: str, record: int, text: str) -> Extraction | None:
        status: Status = "asserted"
        hint: OpHint = "accept"
        rest = s
        if m := _CORRECTION.match(rest):
            hint, rest = "reject", rest[m.end():]
        if m := _HEDGE.match(rest):
            status, rest = "hedged", rest[m.end():]
            hint = "contest" if hint == "accept" else hint
        elif m := _REPORTED.match(rest):
            status, rest = "reported", rest[m.end():]
        m = _STATEMENT.fullmatch(rest)
        if m is None:
            return None
        if m["neg"].lower() == "no longer":
            status, hint = "withdrawn", "revoke"
        return _fact(record, text, "statement", personal_key(m["x"]), m["y"], status, hint, "persona")

    def _cloze(self, s: str, record: int, text: str) -> Extraction | None:
        found = match_cloze(s)
        if found is None:
            return None
        cloze, subject, obj = found
        return _fact(record, text, f"cloze:{cloze.pid}", subject_key(subject, cloze.relation), obj,
                     "asserted", "accept", default_node_type(cloze.relation))

    def _attribute(self, s: str, record: int, text: str) -> Extraction | None:
        if m := _CHANGE.fullmatch(s):
            return _fact(record, text, "attribute.change", subject_key(m["x"], personal_key(m["b"] or m["a"])),
                         m["new"], "asserted", "accept", "persona", previous=m["old"].strip())
        if (m := _POSSESSIVE.fullmatch(s)) and _reads_as_value(m["a"], m["v"]):
            return _fact(record, text, "attribute", subject_key(m["x"], personal_key(m["a"])), m["v"],
                         "asserted", "accept", "persona")
        return None


def _reads_as_value(attribute: str, value: str) -> bool:
    """Whether ``X's attribute is value`` names a value, not a clause about ``X``: a short attribute with no
    preposition, and a short value that opens with neither a participle (``driven by``, ``marked by``,
    ``reflected in``) nor a filler word (``one of``, ``part of``)."""
    a, v = attribute.split(), value.split()
    if len(a) > 4 or _NOT_ATTRIBUTE & {w.lower() for w in a} or not v or len(v) > 6 or ", " in value:
        return False
    first = v[0]
    return not (first.islower() and (first.endswith(("ed", "en", "ing")) or first in _NOT_VALUE))


_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+")


class DialogueTemplateExtractor:
    """Dialogue turns -> facts: the personal statement form (form 2) on each sentence that is not a
    question (a final ``!`` is dropped like a full stop), nothing else."""

    name = "template"

    def __init__(self) -> None:
        self._forms = TemplateExtractor()

    def extract(self, text: str, record: int, said: Utterance | None = None) -> Extraction:
        """The statements of one turn, or the reason there are none."""
        if not text.strip():
            return Extraction(record, text, reason="empty record")
        facts: list[Fact] = []
        problems: list[str] = []
        for part in _SENTENCE_BREAK.split(text.strip()):
            if part.endswith("?"):  # a question asserts nothing
                continue
            found = self._forms._statement(_sentence(part.rstrip("!").rstrip()), record, text)
            if found is not None:
                facts.extend(found.facts)
                problems.extend([found.reason] if found.reason else [])
        if facts:
            return Extraction(record, text, facts=tuple(facts))
        return Extraction(record, text, reason=problems[0] if problems else
                          "no sentence of the form 'my X is now Y' (the template forms for dialogue)")


def _fact(record: int, text: str, form: str, key: str, value: str, status: Status, hint: OpHint,
          node_type: str, previous: str | None = None) -> Extraction:
    value = value.strip()
    if not key:
        return Extraction(record, text, reason=f"{form}: the key is empty after normalisation")
    if not value:
        return Extraction(record, text, reason=f"{form}: the value is empty")
    fact = Fact(key, value, status, hint, CONFIDENCE[status], record, text, form, previous, node_type)
    return Extraction(record, text, facts=(fact,))
