"""Dense retrieval: a llama-index `VectorStoreIndex` over chunks, with an explicit embedding model.

Storage decision (measured on the Arduino corpus, 821 chunks, 2-CPU box): llama-index's
`SimpleVectorStore` persisted as JSON took 1.8 s to write and 4.7 s to load back with
`load_index_from_storage` (docstore + index store + a 6 MB JSON of float lists), and its query
converts the whole embedding dict to an array on every call (~22 ms). That misses the ≤ 1 s
cached-load target, so the index's vector store here is `NumpyVectorStore`: a
`BasePydanticVectorStore` that keeps one unit-normalised float32 matrix, persists it as `.npy`
(loads in milliseconds) and answers queries with one matrix-vector product and `argpartition`.
The index is still built by `VectorStoreIndex(nodes, embed_model=…)`, so any llama-index
embedding (wordllama, Ollama, Gemini) plugs in unchanged; the embedding model is always passed
explicitly, never taken from `Settings`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import BaseNode, NodeWithScore, QueryBundle, TextNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore, VectorStoreQuery, VectorStoreQueryResult,
)
from pydantic import PrivateAttr

from ..types import Chunk, Hit
from .base import Retriever
from .chunking import CHUNK_OVERLAP, CHUNK_SIZE, cached_chunks

CONFIG_VERSION = 1  # bump when node text or normalisation changes, so cached indexes rebuild


class NumpyVectorStore(BasePydanticVectorStore):
    """Unit-normalised float32 matrix; node ids are row numbers. Cosine = dot product."""

    stores_text: bool = True  # nodes come back from `query`, so the index needs no docstore
    _matrix: Any = PrivateAttr(default=None)

    def __init__(self, matrix: np.ndarray | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self._matrix = matrix if matrix is not None else np.zeros((0, 0), dtype=np.float32)

    @property
    def client(self) -> Any:
        return None

    @property
    def matrix(self) -> np.ndarray:
        return self._matrix

    def add(self, nodes: list[BaseNode], **kwargs: Any) -> list[str]:
        start = len(self._matrix)
        ids = [n.node_id for n in nodes]
        if ids != [str(i) for i in range(start, start + len(nodes))]:  # row number == node id
            raise ValueError("NumpyVectorStore needs nodes with ids 0..n-1, added in order")
        rows = _unit(np.asarray([n.get_embedding() for n in nodes], dtype=np.float32))
        self._matrix = rows if start == 0 else np.vstack([self._matrix, rows])
        return ids

    def delete(self, ref_doc_id: str, **kwargs: Any) -> None:
        raise NotImplementedError("indexes are rebuilt, never edited in place")

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        if query.query_embedding is None or not len(self._matrix):
            return VectorStoreQueryResult(nodes=[], similarities=[], ids=[])
        q = _unit(np.asarray(query.query_embedding, dtype=np.float32)[None, :])[0]
        scores = self._matrix @ q
        k = min(query.similarity_top_k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
        top = top[np.argsort(-scores[top], kind="stable")]
        ids = [str(int(i)) for i in top]
        return VectorStoreQueryResult(nodes=[TextNode(id_=i, text="") for i in ids],
                                      similarities=[float(scores[i]) for i in top], ids=ids)


def _unit(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (m / norms).astype(np.float32, copy=False)


class Vector(Retriever):
    """Chunks ranked by cosine similarity to the query embedding."""

    def __init__(self, chunks: list[Chunk], retriever: BaseRetriever, name: str):
        super().__init__(chunks)
        self._retriever = retriever
        self.name = name

    def _retrieve(self, query: str, k: int) -> list[Hit]:
        self._retriever.similarity_top_k = k
        results: list[NodeWithScore] = self._retriever.retrieve(QueryBundle(query))
        return [Hit(self.chunks[int(r.node.node_id)], float(r.score or 0.0), rank)
                for rank, r in enumerate(results, start=1)]


def node_text(chunk: Chunk, title: str) -> str:
    """What gets embedded: the document title then the chunk, so short chunks keep their topic."""
    return f"{title}\n\n{chunk.text}" if title else chunk.text


def cache_key(corpus, backend: str, model_name: str) -> str:
    cfg = json.dumps({"v": CONFIG_VERSION, "size": CHUNK_SIZE, "overlap": CHUNK_OVERLAP, "backend": backend,
                      "model": model_name}, sort_keys=True)
    return f"vector-{backend}-{corpus.content_hash[:16]}-{hashlib.sha256(cfg.encode()).hexdigest()[:8]}"


def build_vector(corpus, *, cache_dir: Path, use_cache: bool = True, embedding: str = "wordllama",
                 name: str = "vector", **embedding_options: Any) -> Vector:
    """Load the vector index of `corpus` from the cache, or build it and persist it atomically."""
    from llama_index.core import StorageContext, VectorStoreIndex

    from .embeddings import embedding_for

    embed_model = embedding_for(embedding, **embedding_options)
    target = Path(cache_dir) / cache_key(corpus, embedding, embed_model.model_name)
    store = None
    if use_cache and (target / "embeddings.npy").exists():
        try:
            chunks = [Chunk(**c) for c in json.loads((target / "chunks.json").read_text(encoding="utf-8"))]
            matrix = np.load(target / "embeddings.npy")
            if matrix.shape[0] == len(chunks):
                store = NumpyVectorStore(matrix)
        except (OSError, ValueError, TypeError):  # a corrupt cache is rebuilt, never fatal
            store = None
        if store is None:
            shutil.rmtree(target, ignore_errors=True)
    # We never insert documents later, so the index needs no node parser; any non-empty list stops
    # llama-index from building its default SentenceSplitter, which loads tiktoken (~0.5 s).
    no_parser = [embed_model]
    if store is not None:
        index = VectorStoreIndex.from_vector_store(store, embed_model=embed_model, transformations=no_parser)
    else:
        chunks = cached_chunks(corpus, cache_dir if use_cache else None)
        titles = {d.doc_id: d.title for d in corpus.documents}
        nodes = [TextNode(id_=str(i), text=node_text(c, titles.get(c.doc_id, ""))) for i, c in enumerate(chunks)]
        store = NumpyVectorStore()
        index = VectorStoreIndex(nodes, embed_model=embed_model, insert_batch_size=4096, transformations=no_parser,
                                 storage_context=StorageContext.from_defaults(vector_store=store))
        if use_cache:
            _persist(target, chunks, store.matrix)
    return Vector(chunks, index.as_retriever(similarity_top_k=10), name)


def _persist(target: Path, chunks: list[Chunk], matrix: np.ndarray) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".tmp-"))
    try:
        np.save(tmp / "embeddings.npy", matrix)
        (tmp / "chunks.json").write_text(json.dumps([c.__dict__ for c in chunks]), encoding="utf-8")
        os.replace(tmp, target) if not target.exists() else shutil.rmtree(tmp)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
