"""Built-in judges, registered like any outside judge would be (see docs/plugins.md)."""

from __future__ import annotations

from .judges import EmbeddingJudge, HybridJudge, LexicalJudge, LLMJudge, register_judge

register_judge("lexical", LexicalJudge)
register_judge("embedding", EmbeddingJudge)
register_judge("hybrid", HybridJudge)
register_judge("llm", LLMJudge)
