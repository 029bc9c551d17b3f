"""The `ollama` provider: a local (or remote) Ollama server through the official `ollama` client.

Configuration: `--model` (default `llama3.1`, or `$OLLAMA_MODEL`), `$OLLAMA_HOST` (the client's
default is http://127.0.0.1:11434), `$OLLAMA_API_KEY` for hosted Ollama (the client sends it as a
bearer token; it never reaches a message). Timeouts, retries, backoff and faults: `http.py`.

Wire format (`POST /api/chat`, non-streaming): tools go out as `{"type": "function", "function":
{name, description, parameters}}`; tool calls come back in `message.tool_calls[].function` with an
arguments object; tool results go back as `{"role": "tool", "tool_name", "content"}` messages.
Ollama gives tool calls no ids, so this provider numbers them (`ollama-1`, `ollama-2`, …).

Malformed tool-call arguments (docs/providers.md): arguments that are an object but wrong (unknown
or missing keys, bad types) reach the tool, which returns an error the model sees and the turn goes
on. Arguments that are not an object at all cannot be represented by the client's response model
(or the server itself answers 500 "error parsing tool call"): the model's output is lost, so the
turn ends with status `bad_tool_args`.
"""

from __future__ import annotations

import functools
import time
from typing import Any

from ..config import OLLAMA_HOST_ENV as HOST_ENV
from ..config import Settings
from ..paths import httpx_options
from ..redact import split_userinfo
from ..types import ModelCall
from .base import ContextInfo, ModelStep, Provider, Readiness, ToolRequest
from ..retries import Failed, transient, with_retries
from .http import (TIMEOUT_ENV, Wording, context_tokens_option, context_tokens_setting, describe, failure_of,
                   network_options_schema, network_settings)

DEFAULT_MODEL = "llama3.1"
DEFAULT_HOST = "http://127.0.0.1:11434"
DEFAULT_TIMEOUT = 120.0  # seconds; a first call may have to load the model into memory
KEY_ENV, MODEL_ENV = "OLLAMA_API_KEY", "OLLAMA_MODEL"
#: The context assumed when neither the `context_tokens` option nor the model's Modelfile (`/api/show`, `num_ctx`)
#: says: Ollama's default `num_ctx`. Ollama cuts a longer prompt from the front without an error, so the budget is
#: what keeps a history and a tool result whole.
CONTEXT_TOKENS = 4096


class OllamaProvider(Provider):
    name = "ollama"
    label = "ollama"
    default_model = f"{DEFAULT_MODEL}, or ${MODEL_ENV}"
    supports_tools = True
    supports_json_schema = True  # `format`: a JSON Schema the server compiles into a grammar
    token_limit_hint = "raise the model's num_predict (Modelfile `PARAMETER num_predict`)"
    context_hint = "raise the context_tokens option (sent to Ollama as num_ctx)"
    context_tokens = CONTEXT_TOKENS
    options_schema = network_options_schema(
        host={"type": "string", "format": "uri", "title": "Server",
              "description": f"where Ollama listens (default ${HOST_ENV}, else {DEFAULT_HOST})"},
        context_tokens=context_tokens_option(", and sent to Ollama as num_ctx"))

    @classmethod
    def is_configured(cls, env) -> Readiness:
        """Configured when `$OLLAMA_HOST` says where the server is (a local default may also answer, but
        nothing says one runs)."""
        if env.get(HOST_ENV):
            return Readiness(True)
        return Readiness(False, f"set {HOST_ENV} to where `ollama serve` listens (e.g. {DEFAULT_HOST})")

    def __init__(self, model: str | None = None, host: str | None = None, timeout: float | None = None,
                 retries: int | None = None, backoff: float | None = None,
                 budget: float | None = None, context_tokens: int | None = None, *, settings: Settings | None = None,
                 **options: Any):
        settings = Settings.given(settings)
        super().__init__(model or settings.get(MODEL_ENV) or DEFAULT_MODEL, settings=settings, **options)
        self._context = context_tokens_setting(context_tokens, self.options_schema["properties"]["context_tokens"])
        self._asked: ContextInfo | None = None
        # Credentials in the URL (http://user:pass@host) go to the client as basic auth; `host` keeps none.
        self.host, self._auth = split_userinfo(host or settings.get(HOST_ENV))
        self.timeout, self.retries, self.backoff, self.budget = network_settings(timeout, retries, backoff, budget,
                                                                                 DEFAULT_TIMEOUT)
        self._client = None

    @property
    def where(self) -> str:
        return self.host or DEFAULT_HOST

    def client(self):
        if self._client is None:
            self._client = _shared_client(self.host, self.timeout, self.settings.get(KEY_ENV), self._auth)
        return self._client

    def list_models(self) -> list[str]:
        """Names of the models installed on the server (`ollama list`); empty when it cannot be reached."""
        try:
            return sorted(m.model for m in self.client().list().models if m.model)
        except Exception:
            return []

    def context_window(self) -> int:
        return self.context_info().tokens  # type: ignore[return-value]

    def context_info(self) -> ContextInfo:
        """The `context_tokens` option (sent as `num_ctx`); else the model's `num_ctx` as `/api/show` reports it
        (its Modelfile's `PARAMETER num_ctx`), asked once; else Ollama's default."""
        tokens, source = self._context
        if tokens:
            return ContextInfo(tokens, f"{source} (sent as num_ctx)")
        if self._asked is None:
            self._asked = self._ask_context()
        return self._asked

    def _ask_context(self) -> ContextInfo:
        trained = None
        try:
            shown = self.client().show(self.model)
            for line in (shown.parameters or "").splitlines():
                name, _, value = line.strip().partition(" ")
                if name == "num_ctx" and value.strip().isdigit() and int(value) > 0:
                    return ContextInfo(int(value), "the server's /api/show (the model's num_ctx)")
            trained = next((v for k, v in (shown.modelinfo or {}).items()
                            if k.endswith(".context_length") and isinstance(v, int)), None)
        except Exception:  # noqa: BLE001 - an older server, or not reachable: the turn says so when it asks
            pass
        more = f"; the model was trained for {trained:,}, set context_tokens to use more" if trained else ""
        return ContextInfo(CONTEXT_TOKENS, f"assumed: Ollama's default num_ctx{more}")

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelStep:
        return self._chat(messages, tools=[{"type": "function", "function": t} for t in tools] or None)

    def complete_json(self, messages: list[dict[str, Any]], schema: dict[str, Any]) -> ModelStep:
        """Output forced to `schema` by Ollama's `format` (a JSON Schema, compiled into a grammar)."""
        return self._chat(messages, format=schema)

    def _chat(self, messages: list[dict[str, Any]], **request: Any) -> ModelStep:
        wire_messages = to_ollama_messages(messages)
        client = self.client()
        if self._context[0]:
            request["options"] = {"num_ctx": self._context[0]}
        start = time.perf_counter()
        try:
            response, retries = with_retries(
                lambda: client.chat(model=self.model, messages=wire_messages, stream=False, **request),
                self.retries, self.backoff, _transient, budget=self.budget)
        except Failed as exc:
            raise failure_of(self, exc.error, self._describe, start, exc.retries, [self.settings.get(KEY_ENV)]) from None
        latency = (time.perf_counter() - start) * 1000
        message = response.message
        requests = []
        for tc in message.tool_calls or ():
            requests.append(ToolRequest(self.new_call_id(), tc.function.name, dict(tc.function.arguments)))
        call = ModelCall(self.name, self.model, round(latency, 3), response.prompt_eval_count, response.eval_count,
                         response.done_reason, response.model, retries)
        return ModelStep(message.content or "", tuple(requests), call)

    # --- faults ------------------------------------------------------------------------------

    def _describe(self, exc: BaseException, retries: int) -> tuple[str, str]:
        return describe(exc, _status(exc), str(getattr(exc, "error", None) or exc)[:300], retries,
                        _OllamaWording(self))


class _OllamaWording(Wording):
    """Ollama's own words for the faults `http.describe` tells apart, and the faults only Ollama has."""

    def __init__(self, provider: OllamaProvider):
        super().__init__(f"Ollama at {provider.where}", f"{HOST_ENV} (or the host option)", provider.timeout,
                         provider.model)
        self.provider = provider

    def first(self, exc, code, detail):
        if code is not None and code >= 500 and _is_tool_parse_error(exc):
            return "bad_tool_args", (f"model {self.model!r} produced tool-call arguments Ollama could not parse: "
                                     f"{detail}")
        bad_args = _bad_arguments(exc) if code is None else None
        if bad_args is not None:
            return "bad_tool_args", (f"model {self.model!r} sent tool-call arguments that are not a JSON object: "
                                     f"{bad_args[:200]!r}")
        return None

    def context_overflow(self, detail):
        # Ollama's error names no size: say which context the conversation's budget assumed
        return (f"{super().context_overflow(detail)}, or raise the model's num_ctx (num_ctx is "
                f"{self.provider.context_window()} tokens, Ollama's default, unless the model's Modelfile sets it)")

    def client_error(self, exc, code, detail):
        if code == 400 and "does not support tools" in detail:
            return "tools_unsupported", (f"model {self.model!r} does not support tool calling: pick a model that "
                                         f"does (e.g. {DEFAULT_MODEL}, qwen2.5) or answer from excerpts (mode "
                                         f"`excerpts`)")
        return None

    def auth(self, code, detail):
        return (f"{self.where} refused the request ({code}: {detail}); set {KEY_ENV} to a valid key for this "
                f"server, or point {HOST_ENV} at your own Ollama")

    def unknown_model(self, detail):
        installed = self.provider.list_models()
        pick = f"; installed: {', '.join(installed)}" if installed else ""
        return (f"{self.where} has no model {self.model!r}: pull it with `ollama pull {self.model}` or pick an "
                f"installed one as the model{pick}")

    def rate_limited(self, tries, detail):
        return f"{self.where} is rate limiting requests (429){tries}: {detail}"

    def timed_out(self):
        return (f"{self.where} did not answer within {self.timeout:g} s (model {self.model!r}); a first call may "
                f"be loading the model: retry, or raise {TIMEOUT_ENV}")

    def unreachable(self):
        return f"cannot connect to {self.where}: start it with `ollama serve`, or set {HOST_ENV} to where it listens"


@functools.lru_cache(maxsize=8)
def _shared_client(host: str | None, timeout: float, api_key: str | None, auth: tuple[str, str] | None = None):
    """One client per configuration: its connection pool is kept (its TLS context is the process's one,
    `paths.tls_context`).

    `api_key` is part of the cache key only because the client reads $OLLAMA_API_KEY when it is built;
    `auth` is the user and password from the host URL, sent as HTTP basic auth (the client drops them
    from the URL itself).
    """
    import ollama  # the SDK is imported only here, and only when used

    return ollama.Client(host=host, timeout=timeout, **httpx_options(), **({"auth": auth} if auth else {}))


def to_ollama_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Provider-neutral messages (see base.py) in Ollama's /api/chat shape."""
    out = []
    for m in messages:
        role = m["role"]
        if role == "tool":
            out.append({"role": "tool", "content": m.get("content") or "", "tool_name": m.get("name")})
        elif role == "assistant" and m.get("tool_calls"):
            out.append({"role": "assistant", "content": m.get("content") or "",
                        "tool_calls": [{"function": {"name": tc["name"], "arguments": tc.get("args") or {}}}
                                       for tc in m["tool_calls"]]})
        else:
            out.append({"role": role, "content": m.get("content") or ""})
    return out


def _status(exc: BaseException) -> int | None:
    code = getattr(exc, "status_code", None)
    return code if isinstance(code, int) and code > 0 else None


def _transient(exc: BaseException) -> bool:
    """429 and 5xx are retried, except a 500 for tool-call arguments the server could not parse."""
    return transient(_status(exc)) and not _is_tool_parse_error(exc)


def _is_tool_parse_error(exc: BaseException) -> bool:
    return "error parsing tool call" in str(getattr(exc, "error", "") or "")


def _bad_arguments(exc: BaseException) -> str | None:
    """The raw arguments when the client rejected a tool call whose arguments are not an object."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return None
    try:
        for e in errors():
            loc = e.get("loc", ())
            if "tool_calls" in loc and loc[-1] == "arguments":
                return str(e.get("input"))
    except Exception:
        return None
    return None
