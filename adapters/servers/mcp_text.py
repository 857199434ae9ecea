"""The text half of an MCP tool result: compact lines a model reads well, made from the JSON-able dicts
:class:`~pmem.adapters.service.guarded.GuardedStore` returns (the structured half is those dicts).

Claims are written as the reader writes them (docs/reading.md): a value with its sources and trust, and
alternatives below the head's trust counted, not listed, so a flood of low-trust claims stays one item.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def claim(value: Any, sources: Sequence[str], trust: Any) -> str:
    return f"{value} ({''.join(s + ', ' for s in sources)}trust {trust})"


def cell(d: Mapping[str, Any]) -> str:
    """``key = value``; a contested cell with its head's and alternatives' sources and trust (needs the
    ``alternatives`` and ``support`` disclosures), then history lines when disclosed."""
    value = "(empty)" if d.get("value") is None else d["value"]
    head, alts = d.get("support"), d.get("alternative_versions")
    line = f"{d['key']} = {value}"
    if d.get("status") == "contested" and head is not None and alts is not None:
        listed = [a for a in alts if a["trust"] >= head["trust"]]
        listed.sort(key=lambda a: (-a["trust"], -a["support"], a["value"]))
        more = len(alts) - len(listed)
        items = [claim(a["value"], a["sources"], a["trust"]) for a in listed]
        items += [f"+{more} lower-trust claim{'s' if more != 1 else ''}"] if more else []
        line = f"{d['key']} = {claim(value, head['sources'], head['trust'])}  [contested: {' | '.join(items)}]"
    elif d.get("status") == "contested":
        line += f"  [contested: {' | '.join(map(str, d.get('alternatives', ())))}]"
    lines = [line]
    if d.get("history"):
        lines.append("  history: " + "; ".join(f"{v['value']} ({v['status']})" for v in d["history"]))
    return "\n".join(lines)


def history(d: Mapping[str, Any]) -> str:
    """One line per version, oldest first: ``v1 25:50 active from #2 (race, trust 80)``."""
    lines = [f"{d['key']}: {len(d['versions'])} version(s)"]
    for v in d["versions"]:
        span = f"from #{v['opened_at']}" + (f" to #{v['closed_at']}" if v.get("closed_at") is not None else "")
        lines.append(f"v{v['vid']} {claim(v['value'], v['sources'], v['trust'])} {v['status']} {span}")
    return "\n".join(lines)


def hits(rows: Sequence[Mapping[str, Any]]) -> str:
    """Search hits, best first: ``0.83 key = value``."""
    return "\n".join(f"{r['score']:.2f} {r['key']} = {r['value']}" for r in rows) or "(no match)"


def receipts(rows: Sequence[Mapping[str, Any]]) -> str:
    """One line per receipt: what was applied to which key, the head after it, and any rewriting."""
    return "\n".join(receipt(r) for r in rows) or "(nothing written)"


def receipt(r: Mapping[str, Any]) -> str:
    if r.get("event_index") is None:
        about = f" about {r['key']}" if r.get("key") else ""
        return f"record {r.get('record', '?')}: nothing written{about} ({r.get('reason') or 'no fact found'})"
    head = r.get("head")
    line = f"#{r['event_index']} {r['op']} {r['key']}"
    line += f" -> {head['value']} ({head['status']})" if head else " -> (empty)"
    if not r.get("applied", True):
        line += f" not applied: {r.get('reason')}"
    if r.get("duplicate"):
        line += " (duplicate op_id: first receipt)"
    if "trust_capped" in r:
        line += f"; trust capped {r['trust_capped']['claimed']} -> {r['trust_capped']['applied']}"
    if "source_set" in r:
        line += f"; source set to {r['source_set']['applied']}"
    return line


def proposals(rows: Sequence[Mapping[str, Any]]) -> str:
    """What to ask or read next, best first."""
    return "\n".join(f"{p['score']:.2f} {p['text']} ({p['type']}): {p['gap']}" for p in rows) or "(nothing to ask)"
