"""Dense retrieval: chunks ranked by the cosine of their embedding to the query's.

The index is built by llama-index's `VectorStoreIndex` with an explicit embedding model into a
`NumpyVectorStore` (`llama_build.py`): one unit-normalised float32 matrix, persisted as `.npy`.
A query is answered here with numpy alone — embed the query, one matrix-vector product,
`argpartition` — whether the matrix was just built or loaded from the cache, so both return
identical rankings and a cached index never imports llama-index (tests/test_retrieval_cache.py).
`k` is an argument of every call: a retriever shared by several app sessions has no per-query
state.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from ..types import Chunk, Hit
from .base import Retriever
from .cache import persist, read_chunks
from .chunking import CHUNK_OVERLAP, CHUNK_SIZE, CHUNKER_VERSION, cached_chunks
from .embeddings import Embedding, embedding_for, unit_rows

#: Bump when node text, normalisation or the files of a cached index change, so old caches rebuild.
#: 2: the query path reads `embeddings.npy` with numpy alone; `meta.json` records the matrix shape.
CONFIG_VERSION = 2


def top_rows(scores: np.ndarray, k: int) -> np.ndarray:
    """Indexes of the `k` highest `scores`, best first, in O(n) plus a sort of the `k`."""
    k = min(k, len(scores))
    top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
    return top[np.argsort(-scores[top], kind="stable")]


def cosines(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    """The cosine of every row of the unit-row `matrix` to `query`.

    `einsum`, not `matrix @ query`: the product goes to OpenBLAS, whose threaded sgemv took 6-13 ms
    for SciFact's 5,502 x 256 matrix on the 2-core machine under load (its threads wait for busy
    cores), against 0.4-1.1 ms for this single-threaded loop — the same work, and most of what a
    cached vector query cost.
    """
    return np.einsum("ij,j->i", matrix, unit_rows(query[None, :])[0])


def top_k(matrix: np.ndarray, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cosines) of the `k` rows of the unit-row `matrix` nearest to `query`, best first."""
    scores = cosines(matrix, query)
    top = top_rows(scores, k)
    return top, scores[top]


class Vector(Retriever):
    """Chunks ranked by cosine similarity to the query embedding."""

    def __init__(self, chunks: list[Chunk], matrix: np.ndarray, embedding: Embedding, name: str = "vector"):
        super().__init__(chunks)
        if matrix.shape[0] != len(chunks):
            raise ValueError(f"{matrix.shape[0]} embeddings for {len(chunks)} chunks")
        self.matrix = matrix
        self.embedding = embedding
        self.name = name

    def scores(self, query: str) -> np.ndarray:
        """The cosine of every chunk to `query`, in chunk order (what hybrid fusion reads)."""
        return cosines(self.matrix, self.embedding.query_vector(query))

    def _retrieve(self, query: str, k: int) -> list[Hit]:
        rows, scores = top_k(self.matrix, self.embedding.query_vector(query), k)
        return [Hit(self.chunks[int(i)], float(s), rank) for rank, (i, s) in enumerate(zip(rows, scores), start=1)]


def node_text(chunk: Chunk, title: str) -> str:
    """What gets embedded: the document title then the chunk, so short chunks keep their topic."""
    return f"{title}\n\n{chunk.text}" if title else chunk.text


def cache_key(corpus, backend: str, model_name: str) -> str:
    cfg = json.dumps({"v": CONFIG_VERSION, "chunker": CHUNKER_VERSION, "size": CHUNK_SIZE, "overlap": CHUNK_OVERLAP,
                      "backend": backend, "model": model_name}, sort_keys=True)
    return f"vector-{backend}-{corpus.content_hash[:16]}-{hashlib.sha256(cfg.encode()).hexdigest()[:8]}"


def build_vector(corpus, *, cache_dir: Path, use_cache: bool = True, rebuild: bool = False, embedding: str = "wordllama",
                 name: str = "vector", **embedding_options: Any) -> Vector:
    """Load the vector index of `corpus` from the cache, or build it and persist it atomically
    (`rebuild`: build and overwrite even if a readable one is cached)."""

    model = embedding_for(embedding, **embedding_options)
    target = Path(cache_dir) / cache_key(corpus, embedding, model.model_name)
    if use_cache and not rebuild:
        cached = load_vector(target, model, name)
        if cached is not None:
            return cached
    from .llama_build import embed_matrix

    chunks = cached_chunks(corpus, cache_dir if use_cache else None)
    titles = {d.doc_id: d.title for d in corpus.documents}
    matrix = embed_matrix([node_text(c, titles.get(c.doc_id, "")) for c in chunks], model)
    if use_cache:
        persist(target, chunks, {"rows": int(matrix.shape[0]), "dim": int(matrix.shape[1])},
                lambda tmp: np.save(tmp / "embeddings.npy", matrix))
    return Vector(chunks, matrix, model, name)


def load_vector(target: Path, model: Embedding, name: str) -> Vector | None:
    """The cached index in `target`, or None when it is absent or unreadable (the caller rebuilds)."""
    meta = read_chunks(target)
    if meta is None:
        return None
    chunks, info = meta
    try:
        matrix = np.load(target / "embeddings.npy", allow_pickle=False)
        if matrix.dtype != np.float32 or matrix.shape != (info["rows"], info["dim"]) or len(chunks) != info["rows"]:
            raise ValueError(f"cached matrix {matrix.shape} {matrix.dtype} does not match {info}")
        return Vector(chunks, matrix, model, name)
    except (OSError, ValueError, KeyError, TypeError, EOFError):  # a corrupt cache is rebuilt, never fatal
        return None
