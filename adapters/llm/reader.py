"""The optional LLM reader: answers a question from a read context, and plans iterative-readout lookups.

Opt-in only: it is configured by ``PMEM_LLM_BASE`` (an OpenAI-compatible ``/v1`` base URL, e.g. a local
xllamacpp server), ``PMEM_LLM_MODEL`` (default ``local``) and ``PMEM_LLM_KEY`` (default ``x``).
litellm is imported on first call (it takes seconds to import). Nothing else in P-Mem needs it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from pmem.domain.errors import ReaderNotConfigured

ANSWER_PROMPT = ("Answer the question from the memory context only. Reply with the answer alone, a few words, "
                 "no explanation.\n\nMemory context:\n{context}\n\nQuestion: {question}\nAnswer:")
LOOKUP_PROMPT = ("You read a memory to answer a question. If the context below is enough, reply DONE. "
                 "Otherwise reply with one short search query for the missing fact, nothing else.\n\n"
                 "Context:\n{context}\n\nQuestion: {question}\nReply:")


@dataclass
class LLMReader:
    """A chat model behind litellm, at temperature 0."""

    base: str
    model: str = "local"
    key: str = "x"
    max_tokens: int = 32
    calls: int = 0  # model invocations, read by tests

    @classmethod
    def from_env(cls) -> LLMReader:
        base = os.environ.get("PMEM_LLM_BASE")
        if not base:
            raise ReaderNotConfigured("LLM reader not configured: set PMEM_LLM_BASE to an OpenAI-compatible /v1 URL")
        return cls(base, os.environ.get("PMEM_LLM_MODEL", "local"), os.environ.get("PMEM_LLM_KEY", "x"))

    def _complete(self, prompt: str) -> str:
        from pmem.adapters.llm.client import _litellm  # imports litellm without fetching its price map

        self.calls += 1
        r: Any = _litellm().completion(model=f"openai/{self.model}", api_base=self.base, api_key=self.key,
                                       messages=[{"role": "user", "content": prompt}], temperature=0,
                                       max_tokens=self.max_tokens)
        return str(r.choices[0].message.content or "").strip().strip("`").strip()

    def answer(self, question: str, context: str) -> str:
        """The model's short answer to ``question`` from ``context``."""
        return self._complete(ANSWER_PROMPT.format(context=context, question=question))

    def next_lookup(self, question: str, context: str) -> str | None:
        """A follow-up query for the iterative readout, or None when the model says the context suffices."""
        reply = self._complete(LOOKUP_PROMPT.format(context=context, question=question))
        return None if not reply or reply.upper().startswith("DONE") else reply.splitlines()[0]
