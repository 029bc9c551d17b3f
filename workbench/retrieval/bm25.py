"""BM25 over chunks with llama-index's BM25Retriever (bm25s + PyStemmer, English stemming on)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import tempfile
from pathlib import Path

from ..text import STOPWORDS, words
from ..types import Chunk, Hit
from .base import Retriever
from .chunking import CHUNK_OVERLAP, CHUNK_SIZE, cached_chunks

CONFIG_VERSION = 2  # bump when chunking or tokenisation changes, so cached indexes rebuild


def _configure_llama_index() -> None:
    """Never let llama-index reach for its OpenAI defaults: no LLM and no embedding for BM25."""
    from llama_index.core import Settings
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.llms import MockLLM

    # Assigning None would print a notice on stdout (breaking --json); mocks are silent.
    if not isinstance(Settings._llm, MockLLM):
        Settings.llm = MockLLM()
    if not isinstance(Settings._embed_model, MockEmbedding):
        Settings.embed_model = MockEmbedding(embed_dim=1)


def _nodes(chunks: list[Chunk], titles: dict[str, str]):
    from llama_index.core.schema import TextNode

    nodes = []
    for i, c in enumerate(chunks):
        # The title is indexed twice (metadata + text): a cheap field boost, since in a help
        # center the title is the best summary of what an article answers.
        title = titles.get(c.doc_id, "")
        node = TextNode(id_=str(i), text=f"{title}\n\n{c.text}", metadata={"title": title})
        nodes.append(node)
    return nodes


class BM25(Retriever):
    name = "bm25"

    def __init__(self, chunks: list[Chunk], retriever):
        super().__init__(chunks)
        self._retriever = retriever

    def _retrieve(self, query: str, k: int) -> list[Hit]:
        from llama_index.core.schema import QueryBundle

        self._retriever.similarity_top_k = k
        # llama-index tokenises the query without its stop-word list, so "how do I … my" would
        # score against the corpus; drop stop words here (keeping the query if nothing is left).
        kept = [w for w in words(query) if w not in STOPWORDS]
        results = self._retriever.retrieve(QueryBundle(" ".join(kept) or query))
        hits = []
        for rank, r in enumerate(results, start=1):
            if r.score is None or r.score <= 0:
                break  # bm25s pads with zero-score rows when few chunks match
            hits.append(Hit(self.chunks[int(r.node.node_id)], float(r.score), rank))
        return hits


def cache_key(corpus, **config) -> str:
    cfg = json.dumps({"v": CONFIG_VERSION, "size": CHUNK_SIZE, "overlap": CHUNK_OVERLAP, **config}, sort_keys=True)
    import hashlib

    return f"bm25-{corpus.content_hash[:16]}-{hashlib.sha256(cfg.encode()).hexdigest()[:8]}"


def bm25_from_chunks(chunks: list[Chunk], titles: dict[str, str]) -> BM25:
    """An in-memory BM25 index over `chunks` (no cache); `build_bm25` persists what this builds."""
    import Stemmer
    from llama_index.retrievers.bm25 import BM25Retriever

    _configure_llama_index()
    retriever = BM25Retriever.from_defaults(nodes=_nodes(chunks, titles), stemmer=Stemmer.Stemmer("english"),
                                            language="en", similarity_top_k=min(10, len(chunks)))
    return BM25(chunks, retriever)


def build_bm25(corpus, *, cache_dir: Path, use_cache: bool = True) -> BM25:
    """Load the BM25 index of `corpus` from the cache, or build and persist it atomically."""
    import Stemmer
    from llama_index.retrievers.bm25 import BM25Retriever

    _configure_llama_index()
    target = Path(cache_dir) / cache_key(corpus)
    chunks_file = target / "chunks.json"
    stemmer = Stemmer.Stemmer("english")
    if use_cache and chunks_file.exists():
        try:
            chunks = [Chunk(**c) for c in json.loads(chunks_file.read_text(encoding="utf-8"))]
            with contextlib.redirect_stderr(io.StringIO()):  # bm25s draws a progress bar on first load
                retriever = BM25Retriever.from_persist_dir(str(target), show_progress=False)
            retriever.stemmer = stemmer
            return BM25(chunks, retriever)
        except Exception:  # a corrupt cache is rebuilt, never fatal
            shutil.rmtree(target, ignore_errors=True)
    chunks = cached_chunks(corpus, cache_dir if use_cache else None)
    retriever = bm25_from_chunks(chunks, {d.doc_id: d.title for d in corpus.documents})._retriever
    if use_cache:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".tmp-"))
        try:
            with contextlib.redirect_stderr(io.StringIO()):  # bm25s draws a progress bar while saving
                retriever.persist(str(tmp))
            (tmp / "chunks.json").write_text(json.dumps([c.__dict__ for c in chunks]), encoding="utf-8")
            os.replace(tmp, target) if not target.exists() else shutil.rmtree(tmp)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
    return BM25(chunks, retriever)
