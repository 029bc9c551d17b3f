"""Retriever template and registry.

Like llama-index's `BaseRetriever`, the public `retrieve()` times and validates; subclasses
implement only `_retrieve()`. Retrievers are built per corpus by a registered factory and cached
on disk per (corpus content hash, retriever config) under `WORKBENCH_HOME`.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..config import DEFAULT_K, index_cache_dir
from ..registry import Registry
from ..types import Chunk, Hit


@dataclass(frozen=True)
class Retrieval:
    """The explicit return value of one retrieval: ranked hits plus how long it took."""

    query: str
    hits: tuple[Hit, ...]
    latency_ms: float


class Retriever(ABC):
    """Ranks chunks of one corpus for a query."""

    name: str = "base"

    def __init__(self, chunks: list[Chunk]):
        self.chunks = chunks

    def retrieve(self, query: str, k: int = DEFAULT_K) -> Retrieval:
        """Top-`k` chunks for `query`, ranked 1..k; records latency in the return value."""
        start = time.perf_counter()
        k = max(1, min(int(k), len(self.chunks)))
        hits = tuple(self._retrieve(query, k)[:k]) if query.strip() else ()
        return Retrieval(query, hits, (time.perf_counter() - start) * 1000)

    @abstractmethod
    def _retrieve(self, query: str, k: int) -> list[Hit]:
        """Return up to `k` hits, best first, with ranks starting at 1."""


#: factory(corpus, cache_dir, **options) -> Retriever
RetrieverFactory = Callable[..., Retriever]
#: Built-ins in `retrieval/builtins.py`; plug-ins through $WORKBENCH_PLUGINS or the entry-point group.
_RETRIEVERS: Registry[RetrieverFactory] = Registry("retriever", f"{__package__}.builtins", "workbench.retrievers")
#: Register a retriever factory under a name; usable as a decorator.
register_retriever = _RETRIEVERS.register
retriever_names = _RETRIEVERS.names


def get_retriever(name: str, corpus, *, cache_dir: Path | None = None, **options) -> Retriever:
    """Build (or load from cache) the retriever `name` over `corpus`."""
    return _RETRIEVERS.build(name, corpus, cache_dir=cache_dir or index_cache_dir(), **options)


def rank_documents(retriever: Retriever, query: str, k: int) -> list[tuple[str, float]]:
    """Top-`k` documents for `query`, one entry per document, scored by its best chunk.

    Chunk rankings are asked for in growing depths until `k` distinct documents appear (or every
    chunk has been ranked), so a document split into many chunks cannot crowd out the others.
    """
    total = len(retriever.chunks)
    depth = min(total, max(4 * k, 20))
    while True:
        best: dict[str, float] = {}
        hits = retriever.retrieve(query, depth).hits
        for hit in hits:
            best.setdefault(hit.chunk.doc_id, hit.score)  # hits are best first: first seen is the max
        if len(best) >= k or depth >= total or len(hits) < depth:  # fewer hits: nothing else matches
            return list(best.items())[:k]
        depth = min(total, depth * 4)
