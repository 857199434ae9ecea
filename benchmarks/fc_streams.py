"""FactConsolidation-style streams of any length, generated from the MQuAKE templates, deterministic by seed.

The construction follows MemoryAgentBench's: numbered counterfactual facts in the 44 cloze templates
("Here is a list of facts:" then ``i. fact.``), where a later line overrides an earlier one on the same
(subject, relation) slot; single-hop questions ask an overridden slot (gold: the later value); multi-hop
questions chain 2-4 relations, each hop's object the next hop's subject, with at least one edited hop whose
original value appears earlier in the list. The benchmark's own 32k/64k/262k files hold 2,310 / ~4,580 /
~18,332 facts (``SIZES``).

Names come from the 6k stream (``factconsolidation_6k_context.txt``), each typed by the relations it
takes part in (a person, a country, a sport, ...). Hubs (countries, cities, sports, religions, languages)
keep their real names; people, works and organisations are also recombined from the real names'
words ("Andrea" + "Beckham"), so a long stream has many more subjects than the 6k one. Multi-hop questions
nest the relations' noun phrases ("the sport of the position Andrea Beckham plays") inside the benchmark's
own question template of the last relation ("Which country was [X] created in?"); the phrases are written
here, apart from the hop policy's synonyms, and several do not appear there ("speciality", "come into being").
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.harness import SHARED_DATA, read_text
from pmem.domain.extraction.cloze import TEMPLATES, match_cloze

FC_DIR = SHARED_DATA / "factconsolidation"
SIZES = {"6k": 455, "32k": 2_310, "64k": 4_580, "262k": 18_332}  # facts per stream
UPDATED = 0.55  # share of slots with a second value (161 of 294 in the 6k stream)
QUESTIONS = 40  # per hop kind, as in the benchmark

# relation -> (subject type, object type): the typed walk a chain takes (MQuAKE relations are typed)
SIGNATURE: dict[str, tuple[str, str]] = {
    "citizenship": ("person", "country"), "spouse": ("person", "person"), "birthplace": ("person", "city"),
    "place_of_death": ("person", "city"), "employer": ("person", "org"), "educated_at": ("person", "org"),
    "religion": ("person", "religion"), "position_played": ("person", "position"),
    "languages_spoken": ("person", "language"), "work_location": ("person", "city"),
    "famous_for": ("person", "work"), "child": ("person", "person"), "field_of_work": ("person", "field"),
    "capital": ("country", "city"), "continent": ("country", "continent"), "head_of_state": ("country", "person"),
    "official_language": ("country", "language"), "head_of_government": ("country", "person"),
    "country": ("city", "country"), "twinned_with": ("city", "city"),
    "ceo": ("org", "person"), "founded_by": ("org", "person"), "headquarters_city": ("org", "city"),
    "chairperson": ("org", "person"), "director": ("org", "person"), "founded_in_city": ("org", "city"),
    "author": ("work", "person"), "country_of_origin": ("work", "country"), "language_of_work": ("work", "language"),
    "performer": ("work", "person"), "creator": ("work", "person"), "developer": ("work", "org"),
    "manufacturer": ("work", "org"), "original_language": ("work", "language"),
    "sport": ("position", "sport"),
}
# Types whose subjects also take these relations (a sport has a country of origin, a religion a founder).
EXTRA: dict[str, tuple[str, ...]] = {"sport": ("country_of_origin",), "religion": ("founded_by", "country_of_origin")}
# How a question names a relation as a noun phrase of its subject {x}: several wordings each, some of
# them paraphrases the hop policy has no synonym for.
PHRASES: dict[str, tuple[str, ...]] = {
    "citizenship": ("the country of citizenship of {x}", "the country {x} is a citizen of", "the nationality of {x}"),
    "spouse": ("the spouse of {x}", "the person married to {x}", "the partner of {x}"),
    "birthplace": ("the city where {x} was born", "the birthplace of {x}"),
    "place_of_death": ("the city where {x} died", "the place of death of {x}"),
    "employer": ("the employer of {x}", "the organisation that employs {x}"),
    "educated_at": ("the university where {x} was educated", "the alma mater of {x}"),
    "religion": ("the religion of {x}", "the faith {x} is affiliated with"),
    "position_played": ("the position {x} plays", "the speciality of {x} on the field"),
    "languages_spoken": ("the language {x} speaks",), "work_location": ("the city where {x} worked",),
    "famous_for": ("the work {x} is famous for", "the best-known creation of {x}"),
    "child": ("the child of {x}",), "field_of_work": ("the field {x} works in",),
    "capital": ("the capital of {x}", "the capital city of {x}"),
    "continent": ("the continent of {x}",), "head_of_state": ("the head of state of {x}",),
    "official_language": ("the official language of {x}",), "head_of_government": ("the head of government of {x}",),
    "country": ("the country {x} is located in",), "twinned_with": ("the twin city of {x}",),
    "ceo": ("the chief executive officer of {x}", "the CEO of {x}"),
    "founded_by": ("the founder of {x}", "the person who founded {x}"),
    "headquarters_city": ("the city where {x} has its headquarters",), "chairperson": ("the chairperson of {x}",),
    "director": ("the director of {x}",), "founded_in_city": ("the city where {x} was founded",),
    "author": ("the author of {x}", "the writer of {x}"),
    "country_of_origin": ("the country of origin of {x}", "the country where {x} came into being"),
    "language_of_work": ("the language {x} was written in",), "performer": ("the performer of {x}",),
    "creator": ("the creator of {x}",), "developer": ("the developer of {x}",),
    "manufacturer": ("the company that produced {x}",), "original_language": ("the original language of {x}",),
    "sport": ("the sport of {x}", "the sport associated with {x}"),
}
RECOMBINED = ("person", "org", "work")  # types that get new names from the real names' words
JOINS = frozenset({"the", "a", "an", "of", "de", "du", "von", "van"})  # no recombined name starts or ends on one
PID = {rel: pid for pid, (_, rel) in TEMPLATES.items()}


@dataclass
class Stream:
    """A generated stream: its fact lines (without numbers) and its questions (MemoryAgentBench's shape)."""

    facts: list[str]
    questions: list[dict[str, Any]] = field(default_factory=list)

    def context_text(self) -> str:
        return "Here is a list of facts:\n" + "".join(f"{i}. {f}\n" for i, f in enumerate(self.facts))

    def write(self, context: Path, questions: Path) -> None:
        context.write_text(self.context_text())
        questions.write_text("".join(json.dumps(q) + "\n" for q in self.questions))


def templates(data: Path = FC_DIR) -> tuple[dict[str, str], dict[str, str]]:
    """The cloze templates and the question templates, by Wikidata property."""
    d = data / "mquake_templates"
    return json.loads(read_text(d / "cloze_templates.json")), json.loads(read_text(d / "question_templates.json"))


def typed_names(context: str) -> dict[str, list[str]]:
    """The 6k stream's names by type (the first type a name takes in a typed relation)."""
    kind: dict[str, str] = {}
    for line in context.splitlines():
        m = match_cloze(line.split(". ", 1)[-1].rstrip("."))
        if m is not None and m[0].relation in SIGNATURE:
            s, o = SIGNATURE[m[0].relation]
            kind.setdefault(m[1], s)
            kind.setdefault(m[2], o)
    out: dict[str, list[str]] = defaultdict(list)
    for name, k in kind.items():
        out[k].append(name)
    return {k: sorted(v) for k, v in out.items()}


class World:
    """The final facts (one value per slot) and, for edited slots, the values they had before."""

    def __init__(self, names: dict[str, list[str]], rng: random.Random) -> None:
        self.names, self.rng = names, rng
        self.kind = {n: k for k, ns in names.items() for n in ns}
        self.value: dict[tuple[str, str], str] = {}
        self.old: dict[tuple[str, str], list[str]] = {}
        split = {k: [n.split(" ", 1) for n in names.get(k, []) if " " in n] for k in RECOMBINED}
        self.words = {k: ([h for h, _ in ws if h.lower() not in JOINS], [t for _, t in ws if t.split()[0] not in JOINS])
                      for k, ws in split.items()}

    def relations(self, kind: str) -> list[str]:
        return sorted({r for r, (s, _) in SIGNATURE.items() if s == kind} | set(EXTRA.get(kind, ())))

    def entity(self, kind: str, fresh: float) -> str:
        """A name of ``kind``: often a new recombined one for people, works and organisations."""
        heads, tails = self.words.get(kind, ([], []))
        if heads and self.rng.random() < fresh:
            for _ in range(20):
                name = f"{self.rng.choice(heads)} {self.rng.choice(tails)}"
                if name not in self.kind:
                    self.kind[name] = kind
                    return name
        return self.rng.choice(self.names[kind])

    def target(self, rel: str) -> str:
        return SIGNATURE[rel][1] if rel in SIGNATURE else "country"

    def fact(self, subject: str, rel: str, edit: bool) -> str:
        """The slot's final value (set now if new); ``edit`` gives a new slot an earlier, overridden value."""
        slot = (subject, rel)
        if slot not in self.value:
            kind = self.target(rel)
            self.value[slot] = self.entity(kind, 0.5)
            edit = edit or self.rng.random() < UPDATED
        if edit and not self.old.get(slot):
            others = [x for x in self.names[self.target(rel)] if x != self.value[slot]]
            self.old[slot] = [self.rng.choice(others)] if others else []
        return self.value[slot]

    def lines(self, cloze: dict[str, str]) -> list[tuple[tuple[str, str], str]]:
        """Every (slot, line): each slot's old values first, then its final one."""
        out = []
        for slot, v in self.value.items():
            tpl = cloze[PID[slot[1]]].replace("[X]", slot[0])
            out += [(slot, tpl.replace("__", x) + ".") for x in [*self.old.get(slot, []), v]]
        return out


def chain(world: World, rng: random.Random, length: int) -> tuple[str, list[str], list[str]] | None:
    """A walk of ``length`` typed relations from a new subject, at least one hop edited: (start, relations,
    the entities reached); None when the walk ends early at a type with no relations."""
    start = world.entity(rng.choice(["person", "person", "work", "org"]), 0.9)
    node, rels, path = start, [], []
    edit_at = rng.randrange(length)
    for i in range(length):
        options = [r for r in world.relations(world.kind.get(node, "person")) if r not in rels]
        if i < length - 1:  # an inner hop must reach a type the walk can leave
            options = [r for r in options if world.relations(world.target(r))]
        if not options:
            return None
        rel = rng.choice(options)
        node = world.fact(node, rel, edit=i == edit_at)
        rels.append(rel)
        path.append(node)
    return start, rels, path


def nested(start: str, rels: Sequence[str], question: dict[str, str], rng: random.Random) -> str:
    """The question for a chain: inner relations as nested noun phrases, the last as its question template."""
    x = start
    for rel in rels[:-1]:
        x = rng.choice(PHRASES[rel]).format(x=x)
    return question[PID[rels[-1]]].replace("[X]", x)


def order(world: World, cloze: dict[str, str], rng: random.Random, n: int) -> list[str]:
    """The facts shuffled, each slot's values kept in their order (an override comes after what it overrides)."""
    pairs = world.lines(cloze)
    rng.shuffle(pairs)
    values: dict[tuple[str, str], list[str]] = defaultdict(list)
    for slot, line in world.lines(cloze):
        values[slot].append(line)
    taken: dict[tuple[str, str], int] = defaultdict(int)
    out = []
    for slot, _ in pairs:  # the slot's k-th place in the shuffle gets its k-th value
        out.append(values[slot][taken[slot]])
        taken[slot] += 1
    return out[:n]


def generate(n_facts: int, seed: int = 0, data: Path = FC_DIR) -> Stream:
    """A stream of ``n_facts`` facts with 40 single-hop and 40 multi-hop questions, from the templates and
    the 6k stream's names in ``data``."""
    rng = random.Random(seed)
    cloze, question = templates(data)
    world = World(typed_names(read_text(data / "factconsolidation_6k_context.txt")), rng)
    chains: list[tuple[str, list[str], list[str]]] = []
    while len(world.value) + sum(map(len, world.old.values())) < n_facts:
        c = chain(world, rng, rng.choice((2, 2, 3, 3, 4)))
        if c is not None:
            chains.append(c)
    facts = order(world, cloze, rng, n_facts)
    present = set(facts)
    sh = [slot for slot in world.old if world.old[slot] and _line(cloze, slot, world.value[slot]) in present]
    stream = Stream(facts)
    for i, (s, r) in enumerate(rng.sample(sh, min(QUESTIONS, len(sh)))):
        stream.questions.append({"source": "generated_sh", "qa_pair_id": f"generated_sh_{i}",
                                 "question": question[PID[r]].replace("[X]", s), "answers": [world.value[(s, r)]]})
    whole = [c for c in chains if all(_line(cloze, (e, r), world.value[(e, r)]) in present
                                      for e, r in zip([c[0], *c[2][:-1]], c[1], strict=True))]
    for i, (start, rels, _) in enumerate(rng.sample(whole, min(QUESTIONS, len(whole)))):
        node = start
        for rel in rels:  # gold: the final values along the chain (another chain may have set a shared hop)
            node = world.value[(node, rel)]
        stream.questions.append({"source": "generated_mh", "qa_pair_id": f"generated_mh_{i}",
                                 "question": nested(start, rels, question, rng), "answers": [node],
                                 "chain": {"start": start, "relations": rels}})
    return stream


def _line(cloze: dict[str, str], slot: tuple[str, str], value: str) -> str:
    return cloze[PID[slot[1]]].replace("[X]", slot[0]).replace("__", value) + "."
