"""Index building through llama-index (with `chunking.py`, the only place that imports it).

llama-index stays the retrieval library: chunks are split by its `SentenceSplitter`
(`chunking.py`), BM25 indexes are built by its `BM25Retriever` (bm25s underneath) and vector
indexes by its `VectorStoreIndex`. What they build is persisted in the small libraries' own
formats (bm25s arrays, a numpy matrix), and a cached index is queried with those libraries
directly (`bm25.py`, `vector.py`): importing `llama_index.core` costs 1.2-3.4 s on the 2-core
machine, more than everything else a query does. So this module is imported only when an index
is built, never on the query path (tests/test_retrieval_cache.py checks that).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import BaseNode, TextNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore, VectorStoreQuery, VectorStoreQueryResult,
)
from pydantic import PrivateAttr

from ..types import Chunk
from .embeddings import Embedding, unit_rows


def configure_llama_index() -> None:
    """Never let llama-index reach for its OpenAI defaults: every model here is passed explicitly."""
    from llama_index.core import Settings
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.llms import MockLLM

    # Assigning None would print a notice on stdout (breaking --json); mocks are silent.
    if not isinstance(Settings._llm, MockLLM):
        Settings.llm = MockLLM()
    if not isinstance(Settings._embed_model, MockEmbedding):
        Settings.embed_model = MockEmbedding(embed_dim=1)


# --- BM25 --------------------------------------------------------------------------------------


def bm25_nodes(chunks: list[Chunk], titles: dict[str, str]) -> list[TextNode]:
    nodes = []
    for i, c in enumerate(chunks):
        # The title is indexed twice (metadata + text): a cheap field boost, since in a help
        # center the title is the best summary of what an article answers.
        title = titles.get(c.doc_id, "")
        nodes.append(TextNode(id_=str(i), text=f"{title}\n\n{c.text}", metadata={"title": title}))
    return nodes


def bm25_index(chunks: list[Chunk], titles: dict[str, str], stemmer, token_pattern: str):
    """llama-index's `BM25Retriever` over `chunks` (node id = row number); its `.bm25` is the bm25s index."""
    from llama_index.retrievers.bm25 import BM25Retriever

    configure_llama_index()
    return BM25Retriever.from_defaults(nodes=bm25_nodes(chunks, titles), stemmer=stemmer, language="en",
                                       token_pattern=token_pattern, similarity_top_k=min(10, len(chunks)))


# --- vectors -----------------------------------------------------------------------------------


class LlamaEmbedding(BaseEmbedding):
    """One of our `Embedding`s seen as a llama-index `BaseEmbedding` (for `VectorStoreIndex`)."""

    _inner: Any = PrivateAttr(default=None)

    def __init__(self, inner: Embedding, **kwargs: Any):
        super().__init__(model_name=inner.model_name, embed_batch_size=inner.embed_batch_size, **kwargs)
        self._inner = inner

    @classmethod
    def class_name(cls) -> str:
        return "WorkbenchEmbedding"

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._inner.get_query_embedding(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._inner.embed_array(list(texts)).tolist()


class NumpyVectorStore(BasePydanticVectorStore):
    """Unit-normalised float32 matrix; node ids are row numbers. Cosine = dot product.

    Storage decision (measured on the Arduino corpus, 821 chunks, 2-CPU box): llama-index's
    `SimpleVectorStore` persisted as JSON took 1.8 s to write and 4.7 s to load back (a 6 MB JSON
    of float lists) and converts its embedding dict to an array on every query; this store keeps
    one matrix that is saved as `.npy` and loads in milliseconds.
    """

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
        rows = unit_rows([n.get_embedding() for n in nodes])
        self._matrix = rows if start == 0 else np.vstack([self._matrix, rows])
        return ids

    def delete(self, ref_doc_id: str, **kwargs: Any) -> None:
        raise NotImplementedError("indexes are rebuilt, never edited in place")

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """Never used: the index is only built through llama-index; queries go to `vector.top_k` over
        the persisted matrix, without importing llama-index."""
        raise NotImplementedError("query the persisted matrix with workbench.retrieval.vector, not llama-index")


def embed_matrix(texts: list[str], embedding: Embedding) -> np.ndarray:
    """The unit-row matrix of `texts`, built by llama-index's `VectorStoreIndex` into a `NumpyVectorStore`."""
    from llama_index.core import StorageContext, VectorStoreIndex

    configure_llama_index()
    nodes = [TextNode(id_=str(i), text=t) for i, t in enumerate(texts)]
    store = NumpyVectorStore()
    # We never insert documents later, so the index needs no node parser; any non-empty list stops
    # llama-index from building its default SentenceSplitter, which loads tiktoken (~0.5 s).
    model = LlamaEmbedding(embedding)
    VectorStoreIndex(nodes, embed_model=model, insert_batch_size=4096, transformations=[model],
                     storage_context=StorageContext.from_defaults(vector_store=store))
    return store.matrix
