"""Chunks from a llama-index node parser, one list per corpus, with stable indexes per document."""

from __future__ import annotations

from ..types import Chunk, Document

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


def _chunks_of(doc: Document, splitter) -> list[Chunk]:
    pages = doc.pages if doc.pages else (doc.text,)
    out: list[Chunk] = []
    for page_no, page_text in enumerate(pages, start=1):
        pieces = splitter.split_text(page_text) if page_text.strip() else []
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
    import hashlib
    import json
    import os
    import tempfile
    from pathlib import Path

    if cache_dir is None:
        return chunk_documents(corpus.documents)
    cfg = hashlib.sha256(f"{CHUNKER_VERSION}-{CHUNK_SIZE}-{CHUNK_OVERLAP}".encode()).hexdigest()[:8]
    path = Path(cache_dir) / f"chunks-{corpus.content_hash[:16]}-{cfg}.json"
    try:
        return [Chunk(**c) for c in json.loads(path.read_text(encoding="utf-8"))]
    except (OSError, ValueError, TypeError):  # absent or corrupt: rebuild
        pass
    chunks = chunk_documents(corpus.documents)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-chunks-")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump([c.__dict__ for c in chunks], f)
    os.replace(tmp, path)
    return chunks
