"""The 44 MQuAKE cloze templates of FactConsolidation, as relation names and matchers.

Each template reads ``<prefix>[X]<middle>__`` (``"The capital of [X] is __"``), misspellings kept as in
``shared/data/factconsolidation/mquake_templates/cloze_templates.json``. A line can fit several
templates (``"The capital of France is Paris"`` also fits ``"The [X] is __"``); the one with the most
literal text wins, which is always the intended one. P131 and P276 share one wording, so they share
the relation ``located_in`` (no text can tell them apart). P1308 ``"The [X] is __"`` fits any sentence
of that shape ("The weather is nice" gives ``weather.officeholder``): a template extractor is meant for
streams written in these templates.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Wikidata property -> (template, relation name used in keys). Relation names are ours: short, stable.
TEMPLATES: dict[str, tuple[str, str]] = {
    "P17": ("[X] is located in the country of __", "country"),
    "P19": ("[X] was born in the city of __", "birthplace"),
    "P20": ("[X] died in the city of __", "place_of_death"),
    "P26": ("[X] is married to __", "spouse"),
    "P30": ("[X] is located in the continent of __", "continent"),
    "P36": ("The capital of [X] is __", "capital"),
    "P40": ("[X]'s child is __", "child"),
    "P50": ("The author of [X] is __", "author"),
    "P69": ("The univeristy where [X] was educated is __", "educated_at"),
    "P106": ("[X] works in the field of __", "field_of_work"),
    "P112": ("[X] was founded by __", "founded_by"),
    "P127": ("[X] is owned by __", "owned_by"),
    "P131": ("[X] is located in __", "located_in"),
    "P136": ("The type of music that [X] plays is __", "music_genre"),
    "P159": ("The headquarters of [X] is located in the city of __", "headquarters_city"),
    "P170": ("[X] was created by __", "creator"),
    "P175": ("[X] was performed by __", "performer"),
    "P176": ("The company that produced [X] is __", "manufacturer"),
    "P264": ("[X] is represented by __", "record_label"),
    "P276": ("[X] is located in __", "located_in"),
    "P407": ("[X] was written in the language of __", "language_of_work"),
    "P413": ("[X] plays the position of __", "position_played"),
    "P495": ("[X] was created in the country of __", "country_of_origin"),
    "P740": ("[X] was founded in the city of __", "founded_in_city"),
    "P800": ("[X] is famous for __", "famous_for"),
    "P364": ("The original language of [X] is __", "original_language"),
    "P1412": ("[X] speaks the language of __", "languages_spoken"),
    "P27": ("[X] is a citizen of __", "citizenship"),
    "P937": ("[X] worked in the city of __", "work_location"),
    "P37": ("The official language of [X] is __", "official_language"),
    "P140": ("[X] is affiliated with the religion of __", "religion"),
    "P178": ("[X] was developed by __", "developer"),
    "P108": ("[X] is employed by __", "employer"),
    "P641": ("[X] is associated with the sport of __", "sport"),
    "P190": ("The twinned administrative body of [X] is __", "twinned_with"),
    "P463": ("[X] is a member of __", "member_of"),
    "P449": ("The origianl broadcaster of [X] is __", "original_broadcaster"),
    "P35": ("The name of the current head of state in [X] is __", "head_of_state"),
    "P286": ("The head coach of [X] is __", "head_coach"),
    "P1308": ("The [X] is __", "officeholder"),
    "P488": ("The chairperson of [X] is __", "chairperson"),
    "P169": ("The chief executive officer of [X] is __", "ceo"),
    "P1037": ("The director of [X] is __", "director"),
    "P6": ("The name of the current head of the [X] government is __", "head_of_government"),
}


@dataclass(frozen=True, slots=True)
class Cloze:
    """One template compiled: ``match`` gives (subject, object) or ``None``."""

    pid: str
    template: str
    relation: str
    pattern: re.Pattern[str]
    specificity: int  # characters of literal text; more is more specific
    prefix: str
    middle: str

    def match(self, sentence: str) -> tuple[str, str] | None:
        if not sentence.startswith(self.prefix) or self.middle not in sentence:
            return None  # the cheap test first: most templates fail it
        m = self.pattern.fullmatch(sentence)
        if m is None:
            return None
        subject, obj = m.group("s").strip(), m.group("o").strip()
        return (subject, obj) if subject and obj else None


def compile_template(pid: str, template: str, relation: str) -> Cloze:
    """``"The capital of [X] is __"`` -> a matcher for ``The capital of <s> is <o>``."""
    if not template.endswith("__") or template.count("[X]") != 1:
        raise ValueError(f"template {pid} is not of the form '...[X]...__': {template!r}")
    prefix, middle = template[:-2].split("[X]")
    pattern = re.compile(f"{re.escape(prefix)}(?P<s>.+?){re.escape(middle)}(?P<o>.+)", re.S)
    return Cloze(pid, template, relation, pattern, len(prefix) + len(middle), prefix, middle)


CLOZES: tuple[Cloze, ...] = tuple(sorted(
    (compile_template(pid, t, r) for pid, (t, r) in TEMPLATES.items()), key=lambda c: -c.specificity))


def match_cloze(sentence: str) -> tuple[Cloze, str, str] | None:
    """The most specific template the sentence fits, with its subject and object."""
    for cloze in CLOZES:
        found = cloze.match(sentence)
        if found is not None:
            return cloze, found[0], found[1]
    return None
