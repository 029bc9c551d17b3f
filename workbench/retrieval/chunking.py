"""Chunks from a llama-index node parser, one list per corpus, with stable indexes per document."""

from __future__ import annotations

from ..types import Chunk, Document

CHUNK_SIZE = 384  # tokens; small enough that a snippet is a passage, not a whole article
CHUNK_OVERLAP = 48


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
