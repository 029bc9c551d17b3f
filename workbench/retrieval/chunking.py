"""Chunks from a llama-index node parser, one list per corpus, with stable indexes per document."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from ..types import Chunk, Document
from .cache import chunks_json, load_chunks, write_file

CHUNK_SIZE = 512  # tokens; a help-center article is one to three chunks, a snippet is a passage
CHUNK_OVERLAP = 64
CHUNKER_VERSION = 1  # bump when splitting changes, so cached chunks rebuild


def chunk_documents(documents, chunk_size: int = CHUNK_SIZE, chunk_overlap: int = CHUNK_OVERLAP) -> list[Chunk]:
    """Split every document (page by page where it has pages) into chunks numbered from 0."""
    from llama_index.core.node_parser import SentenceSplitter

    splitter = SentenceSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap)
    chunks: list[Chunk] = []
    for doc in documents:
        chunks.extend(_chunks_of(doc, splitter))
    return chunks


#: A run this long with no sentence end or line break is no prose a sentence splitter can use.
LONG_RUN_CHARS = 20_000
_SENTENCE_BREAKS = re.compile(r"[.!?\n]")


def _longest_run(text: str) -> int:
    """Length of the longest stretch of `text` without a sentence end or line break (linear)."""
    longest, last = 0, -1
    for m in _SENTENCE_BREAKS.finditer(text):
        longest = max(longest, m.start() - last - 1)
        last = m.start()
    return max(longest, len(text) - last - 1)


def _word_windows(text: str, chunk_size: int, chunk_overlap: int) -> list[str]:
    """Chunks of about `chunk_size` tokens cut at word boundaries, overlapping by about `chunk_overlap`.

    For text without sentence breaks (one 1 MB line), where the sentence splitter falls back to sizing
    every word with its own tokenizer call (~9 s a megabyte): here the text is tokenized once and the
    words are windowed at its average tokens per word (~0.1 s a megabyte)."""
    from llama_index.core.utils import get_tokenizer

    spans = [m.span() for m in re.finditer(r"\S+", text)]
    if not spans:
        return []
    per_word = max(len(get_tokenizer()(text)) / len(spans), 1e-6)
    size = max(1, int(chunk_size / per_word))
    step = max(1, size - int(chunk_overlap / per_word))
    out = []
    for i in range(0, len(spans), step):
        end = min(i + size, len(spans))
        out.append(text[spans[i][0]:spans[end - 1][1]])
        if end == len(spans):
            break
    return out


def _chunks_of(doc: Document, splitter) -> list[Chunk]:
    pages = doc.pages if doc.pages else (doc.text,)
    out: list[Chunk] = []
    for page_no, page_text in enumerate(pages, start=1):
        if not page_text.strip():
            pieces = []
        elif len(page_text) > LONG_RUN_CHARS and _longest_run(page_text) > LONG_RUN_CHARS:
            pieces = _word_windows(page_text, splitter.chunk_size, splitter.chunk_overlap)
        else:
            pieces = splitter.split_text(page_text)
        for piece in pieces:
            out.append(
                Chunk(
                    doc_id=doc.doc_id,
                    chunk_index=len(out),
                    text=piece,
                    page=page_no if doc.pages else None,
                    chunk_type=doc.kind,
                    artifact_kind=doc.artifact_kind,
                )
            )
    if not out:  # a document with a title only is still findable by its title
        out.append(Chunk(doc.doc_id, 0, "", None, doc.kind, doc.artifact_kind))
    return out


def cached_chunks(corpus, cache_dir=None) -> list[Chunk]:
    """`chunk_documents(corpus)`, cached per (corpus content hash, chunking config) and shared by
    every retriever over the corpus, since splitting is slower than embedding or BM25 indexing."""

    if cache_dir is None:
        return chunk_documents(corpus.documents)
    cfg = hashlib.sha256(f"{CHUNKER_VERSION}-{CHUNK_SIZE}-{CHUNK_OVERLAP}".encode()).hexdigest()[:8]
    path = Path(cache_dir) / f"chunks-{corpus.content_hash[:16]}-{cfg}.json"
    chunks = load_chunks(path)  # None when absent or corrupt: rebuilt
    if chunks is None:
        chunks = chunk_documents(corpus.documents)
        write_file(path, chunks_json(chunks))
    return chunks
