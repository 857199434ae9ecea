"""Grounding and attribution (docs/ingest.md#grounding): a proposed fact is kept only if the record says it.

A language model proposes facts; these deterministic rules decide which of them may be written:

- **grounded value**: the value's content words (folded, lower-cased, stop words and plural ``s`` aside)
  appear in the record's text, every one of them (:data:`MIN_COVERAGE`), and every number in the value
  (digits, or a number word up to twenty) appears in the text;
- **evidence span**: when the model quotes one, it must be in the text (:data:`EVIDENCE_COVERAGE` of its
  words);
- **a statement, not a question**: the sentences the value comes from must not all be questions,
  greetings or reactions ("Congrats on the new job!", "Cute little guys!"); a record made only of such
  sentences gives no facts at all, so no model is asked;
- **attribution**: in a dialogue, a fact about a speaker is taken only from that speaker's own turns: a
  fact whose subject is the listener is dropped; ``user``, ``I`` and the speaker's own name mean the
  speaker, but not when the value comes only from words about the listener ("you ...", no "I"); any
  other subject must be named in the text;
- **a durable fact** (:func:`durable_problem`): the value is a name or a short phrase, not a sentence
  (at most :data:`MAX_VALUE_WORDS` words, no end mark, no first- or second-person clause); the
  attribute is a short slot name (at most :data:`MAX_ATTRIBUTE_WORDS` words, no first person); and
  neither names a feeling, a reaction, thanks, agreement or an opinion (:data:`NOT_DURABLE`), which a
  memory of facts about people does not keep; a value that refers back ("the group", "their support",
  "events like these") or is only the listener's name (a form of address) is no fact either. The
  subject's name is a word like any other: a paraphrase that adds it ("Caroline gives others hope") is
  ungrounded.

Every rule answers with the reason a candidate is dropped (or ``None``), which goes on the receipt.
Nothing here does I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pmem.domain.extraction.facts import ascii_fold, personal_key, subject_key, subject_slug
from pmem.domain.keys import normalize_key

MIN_COVERAGE = 1.0
"""The share of a value's content words that must appear in the record: all of them. A value is copied
from the record (stop words, case, accents, plurals and number words aside); one word the record lacks
("eating" for "ate", the speaker's name added) makes it a paraphrase."""
EVIDENCE_COVERAGE = 0.75
"""The share of a quoted evidence span's content words that must appear in the record: a longer span,
where a model may drop or change a word without inventing the value."""

SELF = frozenset({"user", "i", "me", "my", "myself", "speaker", "the speaker", "the user"})
LISTENER = frozenset({"you", "your", "listener", "the listener", "other speaker"})
PLACEHOLDERS = frozenset({"attribute", "key", "value", "subject", "fact", "evidence", "status", "user"})
"""Schema words a model copies instead of naming something: never an attribute."""

_STOP = frozenset("""a an the and or but of to in on at for with from by as is are was were be been being am it its
this that these those there here i me my mine we us our you your he him his she her they them their so very
really just too also has have had do does did not no yes will would can could should about into over than then
up out some any all one's im i'm ive i've it's that's what's""".split())
_NUMBER_WORDS = {w: str(n) for n, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\s+[-–—]\s+|\n+")
_GREETING = re.compile(r"^(hi|hey|hello|good (morning|afternoon|evening|night)|bye|goodbye|see (you|ya)|"
                       r"talk (to you )?(soon|later)|take care|thanks?|thank you|congrats|congratulations|"
                       r"wow|omg|aw+|yay|cool|nice|great|awesome|amazing|sounds|lol|haha|yes|yeah|yep|no|"
                       r"absolutely|totally|sure|of course|good luck|welcome|"
                       r"you|you're|youre|your|that's|thats|that sounds|that is|what a|how)\b", re.I)
_FIRST_PERSON = re.compile(r"\b(i|i'm|i've|i'd|i'll|my|mine|me|we|our|us)\b", re.I)
_REACTION_WORDS = 6  # an exclamation this short, with no first person, is a reaction ("Cute little guys!")

MAX_VALUE_WORDS = 12
"""A longer value is a sentence or a paraphrase, not a name or a short phrase (docs/ingest.md#grounding)."""
MAX_ATTRIBUTE_WORDS = 4
"""A longer attribute is a phrase (``i_m_going_to_keep_using_my_voice``), not the name of a slot."""
_DEGREE = frozenset("pretty quite super totally absolutely truly incredibly extremely bit little much".split())
"""Words of degree, which leave a feeling a feeling ("pretty exciting")."""
_THIRD_PERSON = frozenset("he him his she her hers they them their theirs".split())
"""Stop words, but a value's pronoun must be the record's: "doing her best" from "I'm doing my best" is
a rewording in the third person."""
_OWN = re.compile(r"\b(i|i'm|i've|my|mine|we|our)\b", re.I)
"""First-person words that make an attribute a phrase (``my_story``); ``me_time`` is a slot name."""
_REFERENCE = re.compile(r"^((all|both|the|this|that|these|those|their|our|its|his|her|such)\s+)+", re.I)
"""Determiners that point back: "the group", "this dress", "their support" name nothing by themselves."""
_POINTS_BACK = re.compile(r"\b(this|that|these|those)\W*$", re.I)
"""A value that ends on a demonstrative points back too: "events like these", "part of that"."""
_CLAUSE = re.compile(r"\b(i|i'm|im|i've|ive|i'd|i'll|we|we're|we've|we'd|we'll|you|you're|youre|you've|"
                     r"you'd|you'll|yourself|yourselves)\b", re.I)
"""A first- or second-person subject pronoun, or "yourself": a value holding one is a clause ("I totally
agree", "a great outlet for expressing yourself")."""


@dataclass(frozen=True, slots=True)
class Utterance:
    """Who said a dialogue record, to whom, and when (the session's date): the extractor's context."""

    speaker: str
    listeners: tuple[str, ...] = ()
    when: str | None = None
    replying_to: str | None = None  # the turn it answers, ``Speaker: text``: context for reading it, never evidence


@dataclass(frozen=True, slots=True)
class Candidate:
    """A fact as the model proposes it, before any rule has looked at it."""

    subject: str
    attribute: str
    value: str
    evidence: str | None = None


def words(text: str) -> list[str]:
    """Folded, lower-case words with number words as digits and a plural ``s`` dropped (``dogs`` -> ``dog``)."""
    out = []
    for w in _WORD.findall(ascii_fold(text).lower().replace("’", "'")):
        w = w.removesuffix("'s")
        w = _NUMBER_WORDS.get(w, w)
        out.append(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w)
    return out


def content(text: str) -> set[str]:
    """The words of ``text`` that carry meaning (no stop words)."""
    return {w for w in words(text) if w not in _STOP}


def numbers(text: str) -> set[str]:
    """Every number in ``text``, as digits: ``"3 years"`` and ``"three years"`` both give ``{"3"}``."""
    found = {n.lstrip("0") or "0" for n in _NUMBER.findall(text)}
    return found | {w.lstrip("0") or "0" for w in words(text) if w.isdigit()}


def coverage(part: str, whole: str) -> float:
    """The share of ``part``'s content words that ``whole`` has (1.0 for a part with none)."""
    mine = content(part)
    return 1.0 if not mine else len(mine & content(whole)) / len(mine)


def sentences(text: str) -> list[str]:
    """The record cut into sentences (and dash-separated clauses)."""
    return [s.strip() for s in _SENTENCE.split(text) if s and s.strip()]


def non_assertive(sentence: str) -> str | None:
    """Why a sentence states nothing durable (a question, a greeting, a reaction), or ``None``."""
    s = sentence.strip()
    if s.endswith("?"):
        return "a question"
    n = len(words(s))
    if _GREETING.match(s) and (n <= _REACTION_WORDS or not _FIRST_PERSON.search(s)):
        return "a greeting or reaction"
    if s.endswith("!") and n <= _REACTION_WORDS and not _FIRST_PERSON.search(s):
        return "a reaction"
    return None


def states_nothing(text: str) -> str | None:
    """Why no sentence of the record can hold a fact (all questions, greetings or reactions), or ``None``."""
    parts = sentences(text)
    if not parts:
        return "empty record"
    reasons = [non_assertive(s) for s in parts]
    if all(reasons):
        return f"no statement in the record (only {', '.join(sorted(set(r for r in reasons if r)))})"
    return None


def value_problem(value: str, text: str, evidence: str | None = None) -> str | None:
    """Why ``value`` is not supported by ``text`` (and the model's ``evidence`` span, if given), or ``None``.
    Every content word counts, the subject's name too: "Caroline gives others hope", from Caroline's own
    "I ... give others hope", adds a word the record lacks and is a paraphrase."""
    missing = numbers(value) - numbers(text)
    if missing:
        return f"ungrounded: number {sorted(missing)[0]} of the value is not in the record"
    if not content(value):
        return "ungrounded: the value has no content words"
    if coverage(value, text) < MIN_COVERAGE:
        return "ungrounded: the value's words are not in the record"
    swapped = sorted(set(words(value)) & _THIRD_PERSON - set(words(text)))
    if swapped:
        return f"ungrounded: the value's pronoun {swapped[0]!r} is not in the record (a paraphrase)"
    if evidence and evidence.strip() and coverage(evidence, text) < EVIDENCE_COVERAGE:
        return "ungrounded: the quoted evidence is not in the record"
    return None


def home_sentences(value: str, text: str, evidence: str | None = None) -> list[str]:
    """The sentences a value comes from: those that share the most content words with it (or its evidence)."""
    probe = content(value) | (content(evidence) if evidence else set())
    scored = [(len(probe & content(s)), s) for s in sentences(text)]
    best = max((n for n, _ in scored), default=0)
    return [s for n, s in scored if n == best and n > 0]


def speech_problem(value: str, text: str, evidence: str | None = None) -> str | None:
    """Why the value comes only from questions, greetings or reactions, or ``None``."""
    homes = home_sentences(value, text, evidence)
    reasons = [non_assertive(s) for s in homes]
    if homes and all(reasons):
        return f"not a statement: the value comes from {reasons[0]}"
    return None


_SECOND_PERSON = re.compile(r"\b(you|you're|youre|you've|you'd|you'll|your|yours)\b", re.I)


def addressed_problem(value: str, text: str, evidence: str | None = None) -> str | None:
    """Why a speaker's fact comes from words about the listener ("So cool you found such a helpful group."):
    every sentence it comes from says "you" and not "I"."""
    homes = home_sentences(value, text, evidence)
    if homes and all(_SECOND_PERSON.search(s) and not _FIRST_PERSON.search(s) for s in homes):
        return "misattributed: the value comes from words about the listener, not the speaker"
    return None


_OTHERS = frozenset(("your", "his", "her", "their", "those", "these"))
_BETWEEN_KIN = frozenset(words("and or both little young younger old older own new"))


def others_kin_problem(attribute: str, value: str, text: str, evidence: str | None = None) -> str | None:
    """Why a speaker's family value names someone else's family: every mention of its family words in the
    sentences it comes from belongs to "your", "his", "her", "their", "those" or "these" (reading back over
    other family words, "and", numbers and a few adjectives: "your husband and two kids"). "Creating a family
    for those kids is so lovely", said to a friend who means to adopt, names none of the speaker's."""
    kin = set(words(value)) & KIN
    if not kin or not set(words(attribute.replace("_", " "))) & FAMILY_SLOTS:
        return None
    owners = [_owner(ws, i) for s in home_sentences(value, text, evidence)
              for ws in [words(s)] for i, w in enumerate(ws) if w in kin]
    if owners and all(o in _OTHERS for o in owners):
        return f"misattributed: the family in {value[:40]!r} is someone else's, not the speaker's"
    return None


def _owner(ws: list[str], i: int) -> str:
    """The word a family word at ``ws[i]`` belongs to: the first before it that is not another family word,
    "and", a number or one of a few adjectives ("" at the start)."""
    while i > 0 and (ws[i - 1] in KIN or ws[i - 1] in _BETWEEN_KIN or ws[i - 1].isdigit()):
        i -= 1
    return ws[i - 1] if i > 0 else ""


def resolve_subject(subject: str, said: Utterance | None, text: str) -> tuple[str | None, str]:
    """(who the fact is about, or ``None`` for the user of a plain record; why not) -- the attribution rule."""
    s = " ".join(subject.strip().lower().split())
    if said is not None:
        names = {said.speaker.lower(), said.speaker.lower().split()[0]} if said.speaker.strip() else set()
        if s in SELF or s in names or subject_slug(subject) == subject_slug(said.speaker):
            return said.speaker, ""
        heard = {n.lower() for n in said.listeners} | {subject_slug(n) for n in said.listeners}
        if s in LISTENER or s in heard or subject_slug(subject) in heard:
            return None, (f"misattributed: the fact is about the listener {subject!r}, not said by them "
                          f"(said by {said.speaker})")
    elif s in SELF:
        return None, ""
    if not subject_slug(subject):
        return None, f"no subject in {subject!r}"
    if coverage(subject, text) < 1:
        return None, f"misattributed: the subject {subject!r} is not named in the record"
    return subject, ""


def fact_key(subject: str | None, attribute: str) -> str:
    """``<subject>.<attribute>``, or the user's own key when there is no subject (docs/ingest.md)."""
    return personal_key(attribute) if subject is None else subject_key(subject, normalize_key(attribute))


def holds_value(name: str, value: str) -> bool:
    """Whether the normalised key ``name`` embeds ``value`` as whole words (``personal_best_27_12`` holds
    ``27:12``), which breaks value-independence (docs/ingest.md). Whole words only: ``education`` does not
    hold ``edu``, nor ``career_goal`` ``car``."""
    v = normalize_key(value)
    return len(v) >= 3 and f"_{v}_" in f"_{name.replace('.', '_')}_"


def attribute_problem(attribute: str, value: str, text: str) -> str | None:
    """Why an attribute cannot name a slot: empty, a schema word copied from the prompt, holding its value, or
    naming a number the record does not have (``personal_best_5k_time`` for a turn about pets)."""
    a = normalize_key(attribute)
    if not a or "." in a:
        return f"attribute {attribute[:60]!r} is not a plain name"
    if a in PLACEHOLDERS:
        return f"attribute {a!r} copies a word of the prompt"
    if holds_value(a, value):
        return f"attribute {a!r} contains its value"
    missing = numbers(a.replace("_", " ")) - numbers(text)
    if missing:
        return f"ungrounded: attribute {a!r} names the number {sorted(missing)[0]}, which the record does not have"
    return None


NOT_DURABLE = frozenset(words("""happy happiness unhappy sad sadness glad proud pride excited excitement exciting
thrilled lucky fun enjoy enjoyment joy feel feeling mood emotion upset sorry worried worry
thank thanks thankful thankfulness grateful gratitude appreciate appreciation congrats congratulations
praise compliment agree agreement disagree opinion thought kindness"""))
"""Words of feelings, reactions, thanks, agreement and opinions: an attribute with one of them, or a value made
only of them, is a mood of the moment, not a durable fact about a person (docs/ingest.md#grounding).
Kept as :func:`words` gives them (folded, a plural ``s`` dropped), as attributes and values are compared."""
OPINION = frozenset(words("""important different amazing awesome great good nice special cool beautiful lovely
wonderful inspiring inspired rewarding powerful meaningful interesting best better bad worth tough hard easy"""))
"""Words that judge rather than state: a value made only of these (and of :data:`NOT_DURABLE`) is an opinion.
Not applied to attributes (``good_at`` names a slot)."""


def durable_problem(attribute: str, value: str) -> str | None:
    """Why a fact is not a durable fact about someone: a phrase for an attribute, a sentence, clause,
    reference or opinion for a value; ``None`` for a slot name and a name or short phrase."""
    return _attribute_not_durable(attribute) or _value_not_durable(value)


def _attribute_not_durable(attribute: str) -> str | None:
    a = words(attribute.replace("_", " "))
    name = normalize_key(attribute)[:60]
    if len(a) > MAX_ATTRIBUTE_WORDS:
        return f"not durable: attribute {name!r} is a phrase, not a slot name"
    if _OWN.search(attribute.replace("_", " ")):
        return f"not durable: attribute {name!r} is a first-person phrase"
    mood = sorted(set(a) & NOT_DURABLE)
    if mood:
        return f"not durable: attribute {name!r} names a feeling or reaction ({mood[0]})"
    return None


def _value_not_durable(value: str) -> str | None:
    v = value.strip()
    n = len(words(v))
    if n > MAX_VALUE_WORDS:
        return f"not durable: the value is a sentence ({n} words), not a name or short phrase"
    if v.endswith((".", "!", "?")) and n > 1:
        return "not durable: the value is a whole sentence"
    if _CLAUSE.search(v):
        return "not durable: the value is a first- or second-person clause"
    c = content(v)
    if c & (NOT_DURABLE | OPINION) and c <= NOT_DURABLE | OPINION | _DEGREE:
        return "not durable: the value is a feeling, reaction or opinion"
    rest = _REFERENCE.sub("", v, count=1)
    if (rest != v and len(rest.split()) <= 1 and not rest[:1].isupper()) or _POINTS_BACK.search(v):
        return f"not durable: the value {v[:40]!r} refers to something it does not name"
    return None


FAMILY_SLOTS = frozenset(words("family families relatives household"))
"""Attributes that name who someone's family is: their value names people."""
KIN = frozenset(words("""husband wife spouse partner fiance fiancee kid kids child children son sons daughter daughters
baby babies mom mum mother dad father parent parents brother brothers sister sisters sibling siblings twin twins
grandma grandpa grandmother grandfather grandparent grandparents grandchild grandchildren grandson granddaughter
aunt uncle cousin cousins niece nephew stepson stepdaughter stepmom stepdad in-laws boyfriend girlfriend
pet pets dog dogs cat cats"""))
"""Words for family members (and the pets a family counts): a family value names one of them, or someone by name."""
JOB_SLOTS = frozenset(words("job work occupation profession employment"))
"""Attributes that name what someone works as: their value names a role or an employer."""
ROLE_ENDINGS = ("er", "or", "ist", "yst", "ian", "ant", "eer", "ier")
"""Endings of role nouns (``manager``, ``actor``, ``florist``, ``analyst``, ``librarian``, ``assistant``,
``engineer``, ``cashier``). Not ``-ent``, ``-ive``, ``-ary`` or ``-ee``: ``event``, ``creative``, ``library``
and ``coffee`` end so too; the roles among them are in :data:`ROLES`."""
ROLES = frozenset(words("""nurse chef cook coach judge clerk nanny model pilot poet artist author editor dentist
surgeon doctor lawyer engineer scientist teacher student intern volunteer mom mother dad father parent cop
analyst therapist counselor counsellor barista architect designer developer programmer accountant agent
president resident employee trainee referee executive detective representative secretary"""))
"""Role nouns the endings above miss (``nurse``, ``chef``, ``student``) or that should never depend on them."""
DOING_SLOTS = frozenset(words("activity activities hobby hobbies event events"))
"""Attributes that name what someone does or took part in: their value is not an intention ("to meet ...")."""
_INTENTION = re.compile(r"\s*(?i:to)\s+(?!(?i:the|a|an|my|our|your|his|her|their|its|this|that|these|those|some|any|"
                        r"all)\b)[a-z]")
"""``to`` and a word that is no determiner, in lower case: a verb ("to meet", "to do some research"), not a
place ("to the beach") or a name ("to Paris")."""
WORKPLACES = frozenset(words("""school hospital clinic office company firm bank store shop restaurant cafe bakery
factory farm lab laboratory university college agency studio startup hotel church library museum gym salon garage
newspaper magazine government army navy police"""))
"""Places of work: a job value whose phrase ends in one describes the job ("teach chemistry at a high school")."""


def type_problem(attribute: str, value: str) -> str | None:
    """Why a value is not of the kind its slot holds: a value that only repeats its attribute
    (``hand_painted_bowl = my hand-painted bowl``), a family slot whose value names nobody ("camping",
    "family time"), a job slot whose value is an activity or event rather than a role, a place of
    work or an employer ("swimming with the kids", "charity race"), or an activity or event slot whose
    value is an intention ("to meet other people": a plan, not something done). Other slots are untyped."""
    slot = set(words(attribute.replace("_", " ")))
    said, meant = words(value), content(value)
    # every content word is a word of the attribute, or its start ("edu" under education)
    if meant and all(w in slot or len(w) >= 3 and any(s.startswith(w) for s in slot) for w in meant):
        return f"wrong type: the value {value[:40]!r} only repeats its attribute"
    shown = value.split()  # a capital past the first word, or a one-word value in capitals: a name
    named = any(w[:1].isupper() for w in shown[1:]) or len(shown) == 1 and value[:1].isupper()
    doing = bool(said) and said[0].endswith("ing") and said[0] not in KIN  # an activity ("creating a family")
    if slot & FAMILY_SLOTS and (doing or not (set(said) & KIN or named)):
        return f"wrong type: a family slot's value names family members; {value[:40]!r} names none"
    if slot & DOING_SLOTS and _INTENTION.match(value):
        return (f"wrong type: an activity or event slot's value is something done; {value[:40]!r} is an "
                "intention (a plan)")
    if slot & JOB_SLOTS and said and not named:
        role = any(w in ROLES or w in WORKPLACES or len(w) > 4 and w.endswith(ROLE_ENDINGS) for w in _heads(value))
        if doing or not role:
            return f"wrong type: a job slot's value names a role, a workplace or an employer; {value[:40]!r} does not"
    return None


_PHRASE_BREAK = re.compile(r"\s*(?:,|;|/|\b(?:and|or|at|in|for|with|of|from|on|by)\b)\s*", re.I)


def _heads(value: str) -> list[str]:
    """The last word of each phrase of ``value`` (cut at commas, ``and``/``or`` and prepositions): the word a
    phrase is about ("nurse" in "nurse at the city hospital", "conference" in "transgender conference")."""
    return [ws[-1] for part in _PHRASE_BREAK.split(value) if (ws := words(part))]


def vocative_problem(value: str, said: Utterance) -> str | None:
    """Why a value that is only the listener's name ("Thanks, Caroline, ...") is no fact: it is how the
    speaker addresses them."""
    heard = [content(n) for n in said.listeners]
    if content(value) and any(content(value) <= h for h in heard):
        return "not durable: the value is the listener's name (a form of address)"
    return None


def check(c: Candidate, text: str, said: Utterance | None) -> str | None:
    """Every rule in order: the first reason ``c`` may not be written, or ``None``."""
    problem = (attribute_problem(c.attribute, c.value, text)
               or value_problem(c.value, text, c.evidence)
               or speech_problem(c.value, text, c.evidence) or resolve_subject(c.subject, said, text)[1]
               or durable_problem(c.attribute, c.value) or type_problem(c.attribute, c.value) or None)
    if problem is None and said is not None:
        problem = vocative_problem(c.value, said)
    if problem is None and said is not None and resolve_subject(c.subject, said, text)[0] == said.speaker:
        return (addressed_problem(c.value, text, c.evidence)
                or others_kin_problem(c.attribute, c.value, text, c.evidence))
    return problem
