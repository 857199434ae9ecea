"""``python -m benchmarks.factconsolidation`` end to end on a small made-up stream: a real store, the real
ONNX embedder and litellm against a tiny local chat server (no model, no network). The last line of its
output is the JSON of every figure, and a replies file replays the reader's answers without asking again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.factconsolidation import main
from tests.chat_server import chat_server

FACTS = ["Ada Lovelace is a citizen of France.", "The capital of France is Paris.",
         "Ada Lovelace is a citizen of Belgium.", "The capital of Belgium is Brussels.",
         "Charles Babbage is a citizen of England.", "The capital of England is London."]
QUESTIONS = [
    {"source": "made_up_sh", "qa_pair_id": "made_up_sh_0", "question": "What is the country of citizenship of "
     "Ada Lovelace?", "answers": ["Belgium"]},
    {"source": "made_up_mh", "qa_pair_id": "made_up_mh_0", "question": "What is the capital of the country of "
     "citizenship of Ada Lovelace?", "answers": ["Brussels"]},
]


def files(tmp_path: Path) -> list[str]:
    ctx, qs = tmp_path / "ctx.txt", tmp_path / "q.jsonl"
    ctx.write_text("Here is a list of facts:\n" + "".join(f"{i}. {f}\n" for i, f in enumerate(FACTS)))
    qs.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    return ["--context", str(ctx), "--questions", str(qs), "--results", str(tmp_path / "out")]


def last_json(out: str) -> dict[str, Any]:
    line = out.strip().splitlines()[-1]
    return json.loads(line)  # type: ignore[no-any-return]


def test_without_a_reader_the_json_line_holds_gold_in_context_and_stale_values(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main([*files(tmp_path), "--reader", "none", "--raw"])
    arms = last_json(capsys.readouterr().out)["sizes"]["ctx"]["arms"]
    assert arms["single-hop"]["gold in context %"] == 100 and arms["single-hop"]["stale presented"] == 0
    assert arms["multi-hop, graph-guided"]["gold in context %"] == 100
    # plain RAG shows France, the value Belgium overrode, beside it
    assert arms["single-hop, raw top-12 facts"]["stale presented"] == 1
    assert arms["single-hop"]["answered %"] is None


def test_the_reader_is_scored_by_substring_and_its_replies_replay(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    replies = tmp_path / "replies.jsonl"

    def reply(request: dict[str, Any]) -> str:
        prompt = request["messages"][-1]["content"]
        return "The capital is brussels." if "capital" in prompt.rsplit("Question:", 1)[1] else "France"

    with chat_server(reply) as server:
        monkeypatch.setenv("PMEM_LLM_BASE", server.base)
        monkeypatch.setenv("PMEM_LLM_MODEL", "qwen")
        main([*files(tmp_path), "--replies", str(replies)])
        asked = len(server.requests)
        arms = last_json(capsys.readouterr().out)["sizes"]["ctx"]["arms"]
        # one answer per arm: single-hop, and multi-hop from the graph-guided and the single-shot context
        assert asked == 3 and len(replies.read_text().splitlines()) == 3
        assert arms["single-hop"]["answered %"] == 0  # "France" is the overridden value: wrong
        assert arms["multi-hop, graph-guided"]["answered %"] == 100  # normalized: "brussels." holds Brussels
        assert arms["multi-hop, single-shot"]["answered"] == 1
        main([*files(tmp_path), "--replies", str(replies)])
        assert len(server.requests) == asked  # replayed, not asked again
        assert last_json(capsys.readouterr().out)["sizes"]["ctx"]["arms"] == arms
