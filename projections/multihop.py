"""Graph-guided multi-hop readout: follow value -> subject links from the entities a question names.

Pure. Two policies, both over the open facts of an entity graph (so only current values: a stale
intermediate value is not a fact of the graph and cannot be followed):

- :func:`follow_question` (the hop policy of ``pmem read --hops``): the question's relation phrases
  become *slots* (each a set of attribute names, from the cloze templates' relation names, their
  synonyms, and the store's own attribute names). A small beam of paths starts at the entities the
  question names; each hop follows the edge that fills a slot the path has not filled yet, and falls
  back to cosine to the question only where no edge fills one. A path that has filled every slot is
  finished (it reached the attribute the question ends with) and is not extended. The number of hops
  follows the question (:func:`hop_budget`): one per relation phrase, plus one for a phrase no table
  knows, at most ``MAX_PATH``.
- :func:`guided_facts` (the cosine readout): each hop adds the ``per_hop`` facts of the current
  entities that score best against the whole question.

Entities are found by looking the question's word spans up (:func:`question_entities`), so the cost
does not grow with the number of entities in the store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from pmem.domain.extraction.cloze import TEMPLATES
from pmem.projections.graph import EntityGraph, Fact, entity_slug

Scorer = Callable[[str, Sequence[str]], Sequence[float]]  # (question, texts) -> one score per text
FactsOf = Callable[[str], Sequence[Fact]]  # entity slug -> its open facts ([] when none)
MIN_SLUG = 3
MAX_SPAN = 12  # words: the longest entity name looked up in a question
BEAM = 4  # paths kept after each hop
MAX_PATH = 6  # the longest path a question can ask for (docs/reading.md#multi-hop-reading)
FILL, CHOICE = 1.0, 0.5  # a hop that fills a slot outranks any cosine-only hop (cosine <= 1 * CHOICE)

# Phrases (slug words) a question may use for an attribute, besides the attribute's own name. Written
# from the MQuAKE question templates and their paraphrases; a phrase may stand for several attributes
# ("country"), and the graph decides which one an entity has.
SYNONYMS: dict[str, tuple[str, ...]] = {
    "country": ("country", "located in the country"),
    "birthplace": ("born", "birth", "place of birth", "birthplace", "city of birth"),
    "place_of_death": ("died", "die", "death", "pass away", "passed away", "place of death"),
    "spouse": ("married", "spouse", "partner", "husband", "wife"),
    "continent": ("continent",),
    "capital": ("capital", "capital city"),
    "child": ("child", "son", "daughter", "children"),
    "author": ("author", "wrote", "written by", "writer"),
    "educated_at": ("educated", "education", "university", "studied", "educational institution", "school"),
    "field_of_work": ("field", "work", "profession", "occupation", "job"),
    "founded_by": ("founded", "founder", "established"),
    "owned_by": ("owned", "owner", "owns"),
    "located_in": ("located", "location", "where"),
    "music_genre": ("genre", "music", "musical genre", "type of music"),
    "headquarters_city": ("headquarters", "headquartered", "headquarter"),
    "creator": ("created", "creator", "made"),
    "performer": ("performed", "performer", "singer", "sung"),
    "manufacturer": ("produced", "manufacturer", "company", "maker"),
    "record_label": ("label", "represented", "record label"),
    "language_of_work": ("language", "written in"),
    "position_played": ("position",),
    "country_of_origin": ("origin", "originate", "originated", "come from", "comes from", "created in",
                          "developed", "birthplace", "country"),
    "founded_in_city": ("founded", "founded in"),
    "famous_for": ("famous", "known for", "creation", "notable work"),
    "original_language": ("original language", "language"),
    "languages_spoken": ("speak", "speaks", "language", "languages"),
    "citizenship": ("citizen", "citizenship", "country of citizenship", "nationality", "country", "belong",
                    "belongs", "belonged"),
    "work_location": ("worked", "work location", "location of work", "work"),
    "official_language": ("official language", "language"),
    "religion": ("religion", "religious", "faith", "belief", "affiliated"),
    "developer": ("developer", "developed", "development"),
    "employer": ("employer", "employed", "works for", "worked for"),
    "sport": ("sport", "sports", "game", "plays", "played"),
    "twinned_with": ("twinned", "twin", "sister city"),
    "member_of": ("member", "organization", "belongs"),
    "original_broadcaster": ("broadcaster", "broadcast", "network", "aired"),
    "head_of_state": ("head of state",),
    "head_coach": ("coach", "head coach", "manager"),
    "officeholder": ("holder", "officeholder"),
    "chairperson": ("chairperson", "chairman", "chair", "chairwoman", "president"),
    "ceo": ("ceo", "chief executive officer", "chief executive"),
    "director": ("director", "directed"),
    "head_of_government": ("head of government", "prime minister", "head of the government", "premier"),
}
STOP = frozenset("the of a an in is was what which who where when how to does did do for by and on with".split())


@dataclass(frozen=True, slots=True)
class Hop:
    """One edge a path took: ``subject --relation--> value`` (the fact it read)."""

    fact: Fact
    slot: int | None  # the question slot it filled; None: a cosine fallback hop


@dataclass(frozen=True, slots=True)
class Path:
    """A chain of hops from an entity the question names, with its score and the slots it filled."""

    start: str
    hops: tuple[Hop, ...] = ()
    score: float = 0.0
    filled: frozenset[int] = frozenset()
    complete: bool = False  # it filled every slot of the question: it reached the asked attribute

    @property
    def end(self) -> str:
        return self.hops[-1].fact.obj if self.hops else self.start

    def text(self, names: Callable[[str], str] = lambda s: s.replace("_", " ")) -> str:
        """``entity -> relation -> entity -> ...``, the way a read result shows the path."""
        parts = [names(self.start)]
        for h in self.hops:
            parts += [h.fact.relation, h.fact.value]
        return " -> ".join(parts)


def fact_line(f: Fact) -> str:
    """How a fact reads in a context: ``key = value`` (docs/reading.md)."""
    return f"{f.key} = {f.value}"


def _words(text: str) -> list[str]:
    return [w for w in entity_slug(text).split("_") if w]


def question_spans(question: str) -> list[tuple[int, int, str]]:
    """Every word span of the question's slug that may name an entity: ``(start, end, slug)``, at most
    ``MAX_SPAN`` words, longest first at each start; no lone stop word, no slug under ``MIN_SLUG``."""
    words = _words(question)
    return [(i, j, slug) for i in range(len(words)) for j in range(min(len(words), i + MAX_SPAN), i, -1)
            if len(slug := "_".join(words[i:j])) >= MIN_SLUG and not (j - i == 1 and slug in STOP)]


def question_entities(question: str, is_entity: Callable[[str], bool]) -> list[str]:
    """The entities (slugs with facts, per ``is_entity``) the question names, as word spans of its
    slug (:func:`question_spans`): longest first, none inside a longer one."""
    spans: list[tuple[int, int, str]] = []
    start = -1
    for i, j, slug in question_spans(question):
        if i != start and is_entity(slug):
            spans.append((i, j, slug))
            start = i  # the longest at this start
    spans.sort(key=lambda s: (-(s[1] - s[0]), s[0]))
    kept: list[tuple[int, int, str]] = []
    for i, j, slug in spans:
        if not any(i >= a and j <= b for a, b, _ in kept) and slug not in {s for *_, s in kept}:
            kept.append((i, j, slug))
    return [s for *_, s in kept]


def named_entities(g: EntityGraph, question: str) -> list[str]:
    """:func:`question_entities` over an entity graph."""
    return question_entities(question, lambda s: s in g.entities and bool(g.entities[s].facts))


def phrase_table(relations: Iterable[str] = ()) -> dict[tuple[str, ...], frozenset[str]]:
    """Phrase (slug words) -> the attributes it may name: the synonyms above, each attribute's own
    name (``place_of_death`` -> "place of death") and the store's own attribute names."""
    table: dict[tuple[str, ...], set[str]] = {}
    names = {rel for _, rel in TEMPLATES.values()} | set(relations)
    for rel in names:
        for phrase in (rel.replace("_", " "), *SYNONYMS.get(rel, ())):
            words = tuple(_words(phrase))
            if words and not (len(words) == 1 and words[0] in STOP):
                table.setdefault(words, set()).add(rel)
    return {k: frozenset(v) for k, v in table.items()}


def question_slots(question: str, relations: Iterable[str] = (), skip: Iterable[str] = ()) -> list[frozenset[str]]:
    """The attributes the question asks for, one slot per relation phrase (longest phrase first, no
    overlaps), in question order; words of the entities in ``skip`` are not read as phrases."""
    words = _words(question)
    taken = [False] * len(words)
    for slug in skip:  # an entity's own words name no relation ("Tunisia national football team")
        ent = slug.split("_")
        for i in range(len(words) - len(ent) + 1):
            if words[i:i + len(ent)] == ent:
                taken[i:i + len(ent)] = [True] * len(ent)
    table = phrase_table(relations)
    found: list[tuple[int, frozenset[str]]] = []
    for n in sorted({len(p) for p in table}, reverse=True):
        for i in range(len(words) - n + 1):
            key = tuple(words[i:i + n])
            if key in table and not any(taken[i:i + n]):
                taken[i:i + n] = [True] * n
                found.append((i, table[key]))
    return [rels for _, rels in sorted(found, key=lambda p: p[0])]


def hop_budget(slots: Sequence[frozenset[str]], hops: int) -> int:
    """How many hops a read takes: at least ``hops``; a question naming n relations gets n + 1, since a
    relation may be asked in words no table holds ("Andrea Pirlo's speciality"); at most ``MAX_PATH``."""
    return max(hops, min(MAX_PATH, len(slots) + 1)) if slots else hops


def follow_question(question: str, seeds: Sequence[str], facts_of: FactsOf, scorer: Scorer, *, hops: int = 3,
                    beam: int = BEAM, relations: Iterable[str] = ()) -> list[Path]:
    """The best paths from ``seeds`` (finished ones first, then by score), at most ``beam``, each at
    most :func:`hop_budget` long. A hop that fills an unfilled slot of the question scores ``FILL``; any
    other scores its cosine to the question times ``CHOICE``. Paths never revisit an entity; a path that
    reaches an entity with no further fact stays in the beam as it is."""
    slots = question_slots(question, relations, skip=seeds)
    live = [Path(s) for s in dict.fromkeys(seeds)]
    done: list[Path] = []
    for _ in range(hop_budget(slots, hops)):
        grown = _grow(question, live, slots, facts_of, scorer)
        if not grown:
            break
        grown.sort(key=lambda p: -p.score)
        live = []
        for p in grown[:beam]:
            if slots and len(p.filled) == len(slots):
                done.append(replace(p, complete=True))
            else:
                live.append(p)
        if not live:
            break
    out = sorted(done, key=lambda p: -p.score) + sorted(live, key=lambda p: -p.score)
    return out[:beam]


def _grow(question: str, live: Sequence[Path], slots: Sequence[frozenset[str]], facts_of: FactsOf,
          scorer: Scorer) -> list[Path]:
    """Every one-hop extension of the live paths, scored (one scorer call for all of them), and the live
    paths that have none, unchanged; [] when no path grows."""
    cands: list[tuple[Path, Fact, int | None]] = []
    ended: list[Path] = []
    for p in live:
        visited = {p.start, *(h.fact.obj for h in p.hops)}
        before = len(cands)
        for f in facts_of(p.end):
            if f.obj and f.obj not in visited:
                slot = next((i for i, s in enumerate(slots) if i not in p.filled and f.relation in s), None)
                cands.append((p, f, slot))
        if len(cands) == before:
            ended.append(p)
    if not cands:
        return []
    cos = scorer(question, [f"{f.relation.replace('_', ' ')}: {f.value}" for _, f, _ in cands])
    out = []
    for (p, f, slot), c in zip(cands, cos, strict=True):
        gain = FILL + 0.01 * float(c) if slot is not None else CHOICE * float(c)
        filled = p.filled | {slot} if slot is not None else p.filled
        out.append(Path(p.start, (*p.hops, Hop(f, slot)), p.score + gain, filled))
    return out + ended


def path_facts(paths: Sequence[Path]) -> list[Fact]:
    """The facts along ``paths``, best path first, each once."""
    return list({h.fact.key: h.fact for p in paths for h in p.hops}.values())


def guided_facts(g: EntityGraph, question: str, scorer: Scorer, *, hops: int = 3, per_hop: int = 6,
                 seeds: Sequence[str] = ()) -> list[Fact]:
    """The cosine readout's facts, hop by hop (at most ``hops * per_hop``)."""
    return cosine_facts(question, [*named_entities(g, question), *seeds],
                        lambda s: g.entities[s].facts if s in g.entities else [], scorer, hops=hops, per_hop=per_hop)


def cosine_facts(question: str, seeds: Sequence[str], facts_of: FactsOf, scorer: Scorer, *, hops: int = 3,
                 per_hop: int = 6) -> list[Fact]:
    """Each hop adds the ``per_hop`` facts of the current entities nearest the whole question."""
    frontier = list(dict.fromkeys(seeds))
    chosen: list[Fact] = []
    seen: set[str] = set()
    for _ in range(hops):
        pool = [f for s in frontier for f in facts_of(s) if f.key not in seen]
        if not pool:
            break
        scores = scorer(question, [f"{f.relation.replace('_', ' ')}: {f.value}" for f in pool])
        ranked = sorted(zip(scores, range(len(pool)), strict=True), key=lambda p: (-p[0], p[1]))
        picked = [pool[i] for _, i in ranked[:per_hop]]
        chosen += picked
        seen.update(f.key for f in picked)
        frontier = list(dict.fromkeys(f.obj for f in picked if f.obj))
    return chosen
