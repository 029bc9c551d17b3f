"""The `openai` provider: any OpenAI-compatible chat server through the official `openai` client.

llama.cpp's server, vLLM, LM Studio, OpenRouter and OpenAI itself speak the same chat-completions API.
Configuration: `$OPENAI_BASE_URL` (the client's default is https://api.openai.com/v1; a local server
is e.g. http://127.0.0.1:8080/v1), `$OPENAI_API_KEY`, `--model` (default `$OPENAI_MODEL`, else
`gpt-4o-mini`; a single-model local server answers whatever the name). Timeouts, retries and
backoff: `http.py`; the client's own retries are off so every attempt is ours to count, and a
429/5xx `Retry-After` is honoured (up to `retries.MAX_RETRY_AFTER`). `max_tokens`, `temperature` and
`seed` are sent only when set.

Tools go out in the chat-completions shape (`openai_format`) and are never executed by the client:
each call comes back to the agent loop, which records it. JSON-schema output (`complete_json`, for
`--tool-protocol json-steps`) uses `response_format: {"type": "json_schema"}`, which llama.cpp,
vLLM, LM Studio and OpenAI support; a server that refuses it says so and the message names
the `native` tool protocol.

Malformed tool calls (docs/providers.md): every call has an id, so arguments that are not a JSON
object are answered with a tool error the model sees and the turn goes on.
"""

from __future__ import annotations

import functools
import time
from typing import Any, Mapping

from ..config import Settings
from ..errors import ProviderError
from ..paths import httpx_options
from ..redact import split_userinfo
from .base import ContextInfo, ModelStep, Provider, Readiness
from ..retries import Failed, retry_after, transient, with_retries
from .http import (Wording, basic_auth_headers, context_tokens_option, context_tokens_setting, describe, failure_of,
                   is_context_overflow, network_options_schema, network_settings)
from .openai_format import MAX_TOKENS_ENV, ChatCompletions, error_detail, parse_completion, sampling_options
from .options import setting

DEFAULT_MODEL = "gpt-4o-mini"
DEFAULT_TIMEOUT = 120.0  # seconds; a local server may be slow on CPU
BASE_URL_ENV, KEY_ENV, MODEL_ENV = "OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"
#: Sent as the key to a server that needs none (the client insists on one); never a real credential.
NO_KEY = "no-key"
#: The context assumed when neither the `context_tokens` option nor the server says (docs/providers.md, "Context"):
#: the OpenAI API's models (gpt-4o-mini: 128,000 tokens), and any other server's (llama.cpp's server: 4,096 unless
#: started with more). A llama.cpp server says its own (`GET /props`), vLLM its `max_model_len` (`GET /v1/models`).
API_CONTEXT_TOKENS, SERVER_CONTEXT_TOKENS = 128_000, 4096


class OpenAIProvider(ChatCompletions, Provider):
    name = "openai"
    label = "OpenAI-compatible server"
    default_model = f"${MODEL_ENV}, else {DEFAULT_MODEL}"
    supports_tools = True
    supports_json_schema = True
    options_schema = network_options_schema(
        base_url={"type": "string", "format": "uri", "title": "Base URL",
                  "description": f"server URL ending in /v1 (default ${BASE_URL_ENV}, else the OpenAI API)"},
        api_key={"type": "string", "writeOnly": True, "title": "API key",
                 "description": f"default ${KEY_ENV}; never recorded"},
        context_tokens=context_tokens_option(""),
        **sampling_options("the server's", "the server's"))
    context_tokens = SERVER_CONTEXT_TOKENS
    token_limit_hint = f"raise max_tokens (the `max_tokens` option or ${MAX_TOKENS_ENV})"
    context_hint = "set the context_tokens option to the server's real context, or start the server with more"

    def __init__(self, model: str | None = None, base_url: str | None = None, api_key: str | None = None,
                 timeout: float | None = None, retries: int | None = None, backoff: float | None = None,
                 budget: float | None = None,
                 max_tokens: int | None = None, temperature: float | None = None, seed: int | None = None,
                 context_tokens: int | None = None, *, settings: Settings | None = None, **options: Any):
        settings = Settings.given(settings)
        super().__init__(model or settings.get(MODEL_ENV) or DEFAULT_MODEL, settings=settings, **options)
        self._context = context_tokens_setting(context_tokens, self.options_schema["properties"]["context_tokens"])
        self._asked: ContextInfo | None = None
        # Credentials in the URL (http://user:pass@host/v1) go to the client as a basic-auth header;
        # `base_url` keeps none, so no message, log line or trace ever shows them.
        bare, self._auth = split_userinfo(base_url or settings.get(BASE_URL_ENV))
        self.base_url = (bare or "").rstrip("/") or None
        self._key_var = "api_key" if api_key else KEY_ENV
        # Kept off `options` and out of every message: the key only ever goes to the client.
        self.__key = api_key or settings.get(KEY_ENV)
        self.timeout, self.retries, self.backoff, self.budget = network_settings(timeout, retries, backoff, budget,
                                                                                 DEFAULT_TIMEOUT)
        limit = setting(max_tokens, MAX_TOKENS_ENV, 0, self.options_schema["properties"]["max_tokens"], "max_tokens")
        self.max_tokens = int(limit) if limit else None
        self.temperature = temperature
        self.seed = seed

    def __repr__(self) -> str:
        return f"OpenAIProvider(model={self.model!r}, base_url={self.base_url!r})"

    def context_window(self) -> int:
        return self.context_info().tokens  # type: ignore[return-value]

    def context_info(self) -> ContextInfo:
        """The `context_tokens` option; else the OpenAI API's context when no other server is named; else what the
        server reports (llama.cpp's `/props`, vLLM's `max_model_len`), asked once; else a local server's default."""
        tokens, source = self._context
        if tokens:
            return ContextInfo(tokens, source)
        if self.base_url is None:
            return ContextInfo(API_CONTEXT_TOKENS, "assumed: the OpenAI API's models")
        if self._asked is None:
            self._asked = self._ask_context() or ContextInfo(
                SERVER_CONTEXT_TOKENS, "assumed: a llama.cpp server's default (the server does not report its "
                                       "context; set the context_tokens option)")
        return self._asked

    def _ask_context(self) -> ContextInfo | None:
        """The context the server reports: llama.cpp `GET /props` (`n_ctx`), else vLLM's `GET /v1/models`
        (`max_model_len` of the model); None when it reports none (or cannot be reached: the turn says so later)."""
        try:
            client = self.client()
            root = self.base_url.removesuffix("/v1")  # type: ignore[union-attr]
            body = client.get(f"{root}/props", cast_to=object)  # the official client's raw GET: parsed JSON
            settings = body.get("default_generation_settings") or {}
            n_ctx = settings.get("n_ctx") or body.get("n_ctx")
            if isinstance(n_ctx, int) and n_ctx > 0:
                return ContextInfo(n_ctx, "the server's /props (llama.cpp n_ctx)")
        except Exception:  # noqa: BLE001 - not llama.cpp's server, or not reachable: ask the next way
            pass
        try:
            for m in self.client().models.list():
                size = (m.model_extra or {}).get("max_model_len")
                if m.id == self.model and isinstance(size, int) and size > 0:
                    return ContextInfo(size, "the server's /v1/models (max_model_len)")
        except Exception:  # noqa: BLE001
            pass
        return None

    @classmethod
    def is_configured(cls, env: Mapping[str, str]) -> Readiness:
        if env.get(BASE_URL_ENV) or env.get(KEY_ENV):
            return Readiness(True)
        return Readiness(False, f"set {BASE_URL_ENV} to an OpenAI-compatible server (e.g. a llama.cpp server's "
                                f"http://127.0.0.1:8080/v1), and {KEY_ENV} if it needs a key")

    @property
    def where(self) -> str:
        return self.base_url or "the OpenAI API"

    def client(self):
        if self.__key is None and self.base_url is None:
            raise ProviderError(f"the openai provider needs a server or a key: set {BASE_URL_ENV} to an "
                                f"OpenAI-compatible server, or {KEY_ENV} for the OpenAI API", status="auth_error")
        return _shared_client(self.base_url, self.__key or NO_KEY, self.timeout, self._auth)

    def list_models(self) -> list[str]:
        """Model ids the server lists (`GET /models`); empty when it cannot be reached."""
        try:
            return sorted(m.id for m in self.client().models.list() if m.id)
        except Exception:
            return []

    def _chat(self, request: dict[str, Any]) -> ModelStep:
        start = time.perf_counter()
        try:
            client = self.client()
        except ProviderError as exc:
            raise self._fail(exc, start, 0) from None
        for name in ("max_tokens", "temperature", "seed"):
            if getattr(self, name) is not None:
                request[name] = getattr(self, name)
        try:
            response, retries = with_retries(
                lambda: client.chat.completions.create(model=self.model, **request), self.retries, self.backoff,
                lambda exc: transient(_status(exc)), retry_after=retry_after, budget=self.budget)
        except Failed as exc:
            raise self._fail(exc.error, start, exc.retries) from None
        latency = (time.perf_counter() - start) * 1000
        try:
            return parse_completion(response.model_dump(), self.name, self.model, latency, retries, self.new_call_id)
        except ProviderError as exc:
            raise self._fail(exc, start, retries) from None

    # --- faults ------------------------------------------------------------------------------

    def _fail(self, exc: BaseException, start: float, retries: int) -> ProviderError:
        """One ProviderError per fault, with a message that names the fix and never the key."""
        return failure_of(self, exc, self._describe, start, retries, [self.__key, self.settings.get(KEY_ENV)])

    def _describe(self, exc: BaseException, retries: int) -> tuple[str, str]:
        kind, detail = error_detail(getattr(exc, "body", None) or str(exc))
        return describe(exc, _status(exc), detail, retries, _OpenAIWording(self, kind), kind=_transport)


class _OpenAIWording(Wording):
    """The openai provider's own words for the faults `http.describe` tells apart, and those only it has."""

    def __init__(self, provider: OpenAIProvider, kind: str | None):
        super().__init__(provider.where, f"{BASE_URL_ENV} (or the base_url option)", provider.timeout,
                         provider.model)
        self.provider, self.kind = provider, kind
        self.key_var = provider._key_var if provider._key_var != "api_key" else f"the api_key option (or {KEY_ENV})"

    def client_error(self, exc, code, detail):
        if is_context_overflow(self.kind, detail):
            return "context_overflow", (f"the conversation does not fit model {self.model!r}'s context ({detail}); "
                                        f"lower k, start a new conversation, or use a model or server setting with a longer context")
        if code == 400 and ("response_format" in detail or "json_schema" in detail):
            return "json_schema_unsupported", (f"{self.where} refused JSON-schema output ({detail}); use the "
                                               f"`native` tool protocol")
        return None

    def auth(self, code, detail):
        return f"{super().auth(code, detail)}; set {self.key_var} to a valid key for this server"

    def unknown_model(self, detail):
        listed = self.provider.list_models()
        pick = f" (the server lists: {', '.join(listed[:10])})" if listed else ""
        return f"{super().unknown_model(detail)}; pick another model (or set {MODEL_ENV}){pick}"

    def unreachable(self):
        return f"cannot connect to {self.where}: start the server, or set {BASE_URL_ENV} to where it listens"


def _status(exc: BaseException) -> int | None:
    return getattr(exc, "status_code", None)


def _transport(exc: BaseException) -> str | None:
    """The openai client's own transport errors (its timeout is a kind of connection error)."""
    import openai  # already imported by the client that raised `exc`

    if isinstance(exc, openai.APITimeoutError):
        return "timeout"
    return "connection" if isinstance(exc, openai.APIConnectionError) else None


@functools.lru_cache(maxsize=8)
def _shared_client(base_url: str | None, api_key: str, timeout: float, auth: tuple[str, str] | None = None):
    """One client per configuration: its connection pool is kept (its TLS context is the process's one,
    `paths.tls_context`).

    `auth` is the user and password from the base URL, sent as HTTP basic auth. A request has one
    `Authorization` header, so basic auth then takes the place of the bearer key — as the client's
    HTTP stack itself would do with credentials left in the URL (a server behind an authenticating
    proxy wants the proxy's credentials there).
    """
    import openai  # the SDK is imported only here, and only when used

    return openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0,
                         default_headers=basic_auth_headers(auth),
                         http_client=openai.DefaultHttpxClient(timeout=timeout, **httpx_options()))
