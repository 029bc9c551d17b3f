"""Hybrid retrieval: reciprocal-rank fusion (RRF) of BM25 and vector rankings over the same chunks.

We fuse here rather than through llama-index's `QueryFusionRetriever(mode="reciprocal_rerank")`:
that class runs its retrievers through asyncio tasks and rebuilds nodes for every hit, while the
fusion itself is the few lines below (same formula, same constant). Fusion is over chunks; a
chunk's key is (doc_id, chunk_index), so both rankings must come from the same chunking.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..types import Hit
from .base import Retriever

RRF_K = 60  # the constant of Cormack et al. (2009), also llama-index's; not tuned on any qrels
FUSION_DEPTH = 50  # chunks taken from each ranking before fusing


def rrf(rankings: list[list[Hit]], k: int = RRF_K) -> list[tuple[Hit, float]]:
    """Fuse rankings: score = Σ 1 / (k + rank); ties keep the first ranking's order."""
    scores: dict[tuple[str, int], float] = {}
    first: dict[tuple[str, int], Hit] = {}
    for ranking in rankings:
        for hit in ranking:
            key = (hit.chunk.doc_id, hit.chunk.chunk_index)
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + hit.rank)
            first.setdefault(key, hit)
    order = sorted(scores, key=lambda key: -scores[key])  # sorted() is stable
    return [(first[key], scores[key]) for key in order]


class Hybrid(Retriever):
    name = "hybrid"

    def __init__(self, parts: list[Retriever]):
        super().__init__(parts[0].chunks)
        self.parts = parts

    def _retrieve(self, query: str, k: int) -> list[Hit]:
        depth = max(k, FUSION_DEPTH)
        fused = rrf([list(p.retrieve(query, depth).hits) for p in self.parts])
        return [Hit(hit.chunk, score, rank) for rank, (hit, score) in enumerate(fused[:k], start=1)]


def build_hybrid(corpus, *, cache_dir: Path, use_cache: bool = True, **vector_options: Any) -> Hybrid:
    """BM25 plus the (default wordllama) vector retriever, each loaded from or saved to the cache."""
    from .bm25 import build_bm25
    from .vector import build_vector

    return Hybrid([build_bm25(corpus, cache_dir=cache_dir, use_cache=use_cache),
                   build_vector(corpus, cache_dir=cache_dir, use_cache=use_cache, **vector_options)])
