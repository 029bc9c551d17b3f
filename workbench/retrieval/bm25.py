"""BM25 over chunks: built by llama-index's `BM25Retriever`, queried with bm25s + PyStemmer directly.

The index is llama-index's (bm25s underneath, English stemming and stop words, the title indexed
with each chunk) and is persisted in bm25s's own format. Queries go straight to the bm25s index,
with the same tokenisation and top-k selection as `BM25Retriever._retrieve`, for a just-built
index and a cached one alike, so a cached index never imports llama-index (1-3 s of start-up)
and both return identical rankings and scores (tests/test_retrieval_cache.py checks it against
llama-index's own retriever too). `k` is an argument of every call, never state on a shared
object, so app sessions sharing one retriever cannot change each other's results.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
from pathlib import Path

from ..text import STOPWORDS, english_stemmer, words
from ..types import Chunk, Hit
from .base import Retriever
from .cache import persist, read_chunks
from .chunking import CHUNK_OVERLAP, CHUNK_SIZE, CHUNKER_VERSION, cached_chunks

#: Bump when chunking, tokenisation or the files of a cached index change, so old caches rebuild.
#: 3: bm25s files only (no llama-index corpus.jsonl / retriever.json), plus chunks.json and meta.json.
CONFIG_VERSION = 3
TOKEN_PATTERN = r"(?u)\b\w\w+\b"  # BM25Retriever's default, used for documents and queries alike


class BM25(Retriever):
    name = "bm25"

    def __init__(self, chunks: list[Chunk], index):
        super().__init__(chunks)
        self.index = index  # a bm25s.BM25, read-only once built

    @staticmethod
    def query_text(query: str) -> str:
        """The query minus our stop words ("how do I … my" would otherwise score against the
        corpus: bm25s's English list lacks "how" and "do"); the whole query if nothing is left."""
        return " ".join(w for w in words(query) if w not in STOPWORDS) or query

    def query_tokens(self, query: str) -> list[str]:
        """The stemmed terms bm25s scores, tokenised exactly as `BM25Retriever._retrieve` does."""
        return import_bm25s().tokenize(self.query_text(query), stemmer=english_stemmer(),
                                       token_pattern=TOKEN_PATTERN, show_progress=False, return_ids=False)[0]

    def scores(self, query: str):
        """The BM25 score of every chunk for `query` (float32 array, chunk order; what hybrid fusion reads)."""
        tokens = self.query_tokens(query)
        if not tokens:
            import numpy as np

            return np.zeros(len(self.chunks), dtype=np.float32)
        return self.index.get_scores(tokens)

    def _retrieve(self, query: str, k: int) -> list[Hit]:
        rows, scores = self.index.retrieve([self.query_tokens(query)], k=k, show_progress=False)
        hits = []
        for rank, (i, score) in enumerate(zip(rows[0], scores[0]), start=1):
            if score <= 0:
                break  # bm25s pads with zero-score rows when few chunks match
            hits.append(Hit(self.chunks[int(i)], float(score), rank))
        return hits


def import_bm25s():
    """bm25s, imported without scipy.

    When scipy is installed (torch and sentence-transformers bring it, and much else), bm25s imports `scipy.sparse`
    at import time to build an index's sparse matrix with it: 0.1 s of every process that loads a BM25 index, a
    quarter of a cached `workbench ask` (benchmarks/README.md). Its numpy backend builds the same matrix, and loading
    or querying an index uses neither. So bm25s is imported with `import scipy` failing on this thread only
    (`_NoScipyOnThisThread`): it takes its numpy backend, and any other thread importing scipy meanwhile is not
    touched. Where scipy is imported already, bm25s finds it and uses it, as before."""
    if "bm25s" not in sys.modules:
        finder = _NoScipyOnThisThread()
        sys.meta_path.insert(0, finder)
        try:
            import bm25s  # noqa: F401  (imported with the finder in place)
        finally:
            sys.meta_path.remove(finder)
    import bm25s

    return bm25s


class _NoScipyOnThisThread:
    """A meta path finder that refuses `scipy` and its submodules to the thread that made it, and to no other."""

    def __init__(self):
        self.thread = threading.get_ident()

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "scipy" and threading.get_ident() == self.thread:
            raise ModuleNotFoundError(f"{name} is not imported for bm25s (workbench.retrieval.bm25.import_bm25s)",
                                      name=name)
        return None  # anything else, or another thread: the usual finders


def cache_key(corpus, **config) -> str:
    cfg = json.dumps({"v": CONFIG_VERSION, "chunker": CHUNKER_VERSION, "size": CHUNK_SIZE, "overlap": CHUNK_OVERLAP,
                      **config}, sort_keys=True)
    return f"bm25-{corpus.content_hash[:16]}-{hashlib.sha256(cfg.encode()).hexdigest()[:8]}"


def bm25_from_chunks(chunks: list[Chunk], titles: dict[str, str]) -> BM25:
    """An in-memory BM25 index over `chunks` (no cache); `build_bm25` persists what this builds."""
    import Stemmer

    from .llama_build import bm25_index

    import_bm25s()  # before llama-index's retriever imports it

    return BM25(chunks, bm25_index(chunks, titles, Stemmer.Stemmer("english"), TOKEN_PATTERN).bm25)


def build_bm25(corpus, *, cache_dir: Path, use_cache: bool = True, rebuild: bool = False) -> BM25:
    """Load the BM25 index of `corpus` from the cache, or build and persist it atomically
    (`rebuild`: build and overwrite even if a readable one is cached)."""
    target = Path(cache_dir) / cache_key(corpus)
    if use_cache and not rebuild:
        cached = load_bm25(target)
        if cached is not None:
            return cached
    chunks = cached_chunks(corpus, cache_dir if use_cache else None)
    bm25 = bm25_from_chunks(chunks, {d.doc_id: d.title for d in corpus.documents})
    if use_cache:
        persist(target, chunks, {"num_docs": len(chunks), "vocab": len(bm25.index.vocab_dict)},
                lambda tmp: bm25.index.save(str(tmp), show_progress=False))
    return bm25


def load_bm25(target: Path) -> BM25 | None:
    """The cached index in `target` read with bm25s, or None when absent or unreadable (then rebuilt)."""
    meta = read_chunks(target)
    if meta is None:
        return None
    chunks, info = meta
    try:
        index = import_bm25s().BM25.load(str(target), load_corpus=False, show_progress=False)
        vocab, scores = index.vocab_dict, index.scores
        indptr, data, indices = scores["indptr"], scores["data"], scores["indices"]
        # bm25s's own invariants (its vocabulary ends with an empty token that has no column), so a
        # truncated or mixed-up file is caught here rather than as a wrong score later
        if not (int(scores["num_docs"]) == len(chunks) == info["num_docs"] and len(vocab) == info["vocab"]
                and len(indptr) == len(vocab) and int(indptr[-1]) == len(data) == len(indices)
                and (len(indices) == 0 or int(indices.max()) < len(chunks))):
            return None
        return BM25(chunks, index)
    except (OSError, ValueError, KeyError, TypeError, EOFError):  # a corrupt cache is rebuilt, never fatal
        return None
