"""Slot-style extraction (docs/ingest.md#slots): a fixed card of lasting-fact slots about the speaker.

A small model asked to name its own attributes invents loose ones (``family = loved ones``) or puts the
value in the key (``accepted = accepted``). Asked instead to fill a small fixed card about the person who
speaks (job, plans, activities, family, places, events, identity, relationships), it only has to find
values: every key is a slot name, so no key can leak from the prompt, and every fact is about the speaker.
Each filled slot then goes through the same grounding, attribution and durability rules as any proposed
fact (:func:`domain.extraction.llm_output.grounded_fact`), and the verification pass asks the slot's own
question. Nothing here does I/O.
"""

from __future__ import annotations

from typing import Any

from pmem.domain.extraction.facts import Extraction, Fact
from pmem.domain.extraction.grounding import Utterance, content
from pmem.domain.extraction.llm_output import find_json_object, grounded_fact

SLOT_FORM = "llm-slot"
"""The form of a fact that came from a slot (soft key identity treats every ``llm*`` form alike)."""

SLOTS: dict[str, tuple[str, str]] = {
    "job": ("their work, studies or career", "what work, studies or career does {name} have"),
    "plans": ("what they plan, hope or mean to do", "what does {name} plan, hope or mean to do"),
    "activities": ("what they do or did: hobbies, sports, things they made",
                   "what does {name} do as a hobby or activity"),
    "family": ("their family members and pets, with names", "who is in {name}'s family, pets included"),
    "places": ("where they live, come from or went", "where does {name} live, come from or go"),
    "events": ("events they went to or took part in, with when", "what event did {name} go to or take part in"),
    "identity": ("who they are: gender, background, beliefs", "who is {name}: their gender, background or beliefs"),
    "relationships": ("their friends and partners, and for how long", "who are {name}'s friends or partners"),
}
"""Slot name -> (what it holds, as the prompt says it; the blind question that checks it, ``{name}`` the person)."""

SLOT_PROMPT = """You fill a memory card about one person, the speaker, from one message they said in a conversation.
Fill a slot only with what the speaker says about themselves (I, my, me, we). A value is a name or short phrase
copied word for word from the message. Write "" for a slot the message does not state. Questions, greetings,
thanks, praise, feelings and opinions fill no slot; nor does anything about the listener. The slots:
""" + "\n".join(f"- {name}: {holds}" for name, (holds, _) in SLOTS.items()) + (
    "\nAnswer with one JSON object that has every slot.")

SLOT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {name: {"type": "string"} for name in SLOTS},
    "required": list(SLOTS),
    "additionalProperties": False,
}
"""Every slot a string: a schema that allowed null per slot was answered with every slot null."""

EMPTY = frozenset({"", "none", "null", "n/a", "na", "nothing", "unknown", "not stated", "not mentioned", "-"})
"""What a model writes for an unfilled slot; such a slot proposes nothing (it is not a dropped fact)."""


def slot_question(attribute: str, name: str) -> str | None:
    """The blind question for a slot, about ``name``; ``None`` for an attribute that is no slot."""
    slot = SLOTS.get(attribute)
    return None if slot is None else slot[1].format(name=name)


def filled(obj: dict[str, Any]) -> list[tuple[str, str]]:
    """(slot, value) of every slot the answer filled, in the card's order."""
    out = []
    for name in SLOTS:
        value = obj.get(name)
        if isinstance(value, str) and value.strip().strip(".").lower() not in EMPTY:
            out.append((name, value.strip()))
    return out


def repeated(fact: Fact, kept: list[Fact]) -> str | None:
    """Why ``fact`` is a value the card already gave under an earlier slot (one fact filed twice), or ``None``."""
    words = content(fact.value)
    first = next((f for f in kept if content(f.value) == words), None)
    return None if first is None else f"the same value as slot {first.key.rpartition('.')[2]!r}"


def parse_slots(output: str, record: int, text: str, said: Utterance | None = None) -> Extraction:
    """Facts about the speaker from a slot answer, each through the grounding rules; the rest on ``dropped``."""
    obj, why = find_json_object(output, next(iter(SLOTS)))
    if obj is None:
        return Extraction(record, text, reason=why, failed=True)
    subject = said.speaker if said is not None else "user"
    facts: list[Fact] = []
    dropped: list[str] = []
    for slot, value in filled(obj):
        item = {"subject": subject, "attribute": slot, "value": value, "evidence": value}
        got = grounded_fact(item, record, text, said, SLOT_FORM)
        if isinstance(got, Fact):
            got = repeated(got, facts) or got
        (facts.append(got) if isinstance(got, Fact) else dropped.append(f"slot {slot!r} = {value[:60]!r}: {got}"))
    if not facts:
        reason = "the model filled no slot" if not dropped else f"every slot was dropped: {dropped[0]}"
        return Extraction(record, text, reason=reason, dropped=tuple(dropped))
    return Extraction(record, text, facts=tuple(facts), dropped=tuple(dropped))
