"""The `gemini` provider: Google's Gemini API through the official `google-genai` SDK.

Configuration: `--model` (default `gemini-2.5-flash`, or `$GEMINI_MODEL`), the key from
`$GEMINI_API_KEY` (or `$GOOGLE_API_KEY`), and `$GEMINI_BASE_URL` to point the SDK at a compatible
server (passed as `HttpOptions(base_url=…)`). The API version is `v1beta` unless
`$GOOGLE_GENAI_API_VERSION` says otherwise. Timeouts, retries, backoff and faults: `http.py`.

Tools go out as one `Tool` of `FunctionDeclaration`s with JSON-Schema parameters, and automatic
function calling is disabled: the agent loop must see and record every call itself. The model's
`functionCall` parts become `ToolRequest`s; results go back as `functionResponse` parts in a user
turn. The model's own turn is replayed verbatim when possible, so thought signatures survive.

Malformed tool calls (docs/providers.md): arguments that are an object but wrong reach the tool,
which returns an error the model sees. A call Gemini itself could not parse comes back as finish
reason `MALFORMED_FUNCTION_CALL` with no call to answer, so the turn ends with `bad_tool_args`.
"""

from __future__ import annotations

import functools
import json
import time
from typing import Any

from ..config import GEMINI_BASE_URL_ENV as BASE_URL_ENV
from ..config import GEMINI_KEY_ENVS, Settings
from ..errors import ProviderError
from ..paths import NO_REDIRECTS
from ..redact import split_userinfo
from ..types import ModelCall
from .base import ModelStep, Provider, Readiness, ToolRequest
from ..retries import Failed, transient, with_retries
from .http import Wording, basic_auth_headers, describe, failure_of, network_options_schema, network_settings

DEFAULT_MODEL = "gemini-2.5-flash"
DEFAULT_TIMEOUT = 60.0
KEY_ENVS = GEMINI_KEY_ENVS
MODEL_ENV, API_VERSION_ENV = "GEMINI_MODEL", "GOOGLE_GENAI_API_VERSION"
#: The context a conversation's budget assumes: Gemini 2.x models take 1,048,576 input tokens.
CONTEXT_TOKENS = 1_048_576
MODELS_URL = "https://ai.google.dev/gemini-api/docs/models"
_BLOCKED = {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"}


class GeminiProvider(Provider):
    name = "gemini"
    label = "gemini"
    default_model = f"{DEFAULT_MODEL}, or ${MODEL_ENV}"
    supports_tools = True
    # Gemini can constrain output to a schema, but this provider sends none: `complete` has no way to ask.
    supports_json_schema = False
    context_tokens = CONTEXT_TOKENS
    options_schema = network_options_schema(
        api_key={"type": "string", "writeOnly": True, "title": "API key",
                 "description": f"default ${KEY_ENVS[0]} (or ${KEY_ENVS[1]}); never recorded"},
        base_url={"type": "string", "format": "uri", "title": "Base URL",
                  "description": f"a Gemini-compatible server (default ${BASE_URL_ENV}, else Google)"})

    @classmethod
    def is_configured(cls, env) -> Readiness:
        if any(env.get(v) for v in KEY_ENVS):
            return Readiness(True)
        return Readiness(False, f"set {KEY_ENVS[0]} (or {KEY_ENVS[1]}) to a key from https://aistudio.google.com/apikey")

    def __init__(self, model: str | None = None, api_key: str | None = None, base_url: str | None = None,
                 timeout: float | None = None, retries: int | None = None, backoff: float | None = None,
                 budget: float | None = None, *, settings: Settings | None = None, **options: Any):
        settings = Settings.given(settings)
        super().__init__(model or settings.get(MODEL_ENV) or DEFAULT_MODEL, settings=settings, **options)
        self._key_var = "api_key" if api_key else next((v for v in KEY_ENVS if settings.get(v)), KEY_ENVS[0])
        # Kept off `options` and out of every message: the key only ever goes to the SDK.
        self.__key = api_key or settings.get(self._key_var)
        # Credentials in the URL (http://user:pass@host) go to the SDK as a basic-auth header; `base_url` keeps none.
        self.base_url, self._auth = split_userinfo(base_url or settings.get(BASE_URL_ENV))
        self.timeout, self.retries, self.backoff, self.budget = network_settings(timeout, retries, backoff, budget,
                                                                                 DEFAULT_TIMEOUT)
        self._client = None
        # the calls of one model step (`_step_key`) → the model's own Content, replayed verbatim
        self._model_turns: dict[tuple[Any, ...], Any] = {}
        self._server_ids: set[str] = set()

    def __repr__(self) -> str:
        return f"GeminiProvider(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def where(self) -> str:
        return self.base_url or "the Gemini API"

    def client(self):
        if self.__key is None:
            raise ProviderError(f"Gemini needs an API key: set {KEY_ENVS[0]} (or {KEY_ENVS[1]}); create one at "
                                "https://aistudio.google.com/apikey", status="auth_error")
        if self._client is None:
            self._client = _shared_client(self.__key, self.base_url, int(self.timeout * 1000),
                                          self.settings.get(API_VERSION_ENV, "v1beta"), self._auth)
        return self._client

    def list_models(self) -> list[str]:
        """Models the key may call `generateContent` on; empty when they cannot be listed."""
        try:
            out = []
            for m in self.client().models.list():
                actions = m.supported_actions or []
                if not actions or "generateContent" in actions:
                    out.append((m.name or "").removeprefix("models/"))
            return sorted(n for n in out if n)
        except Exception:
            return []

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelStep:
        from google.genai import types

        try:
            client = self.client()
        except ProviderError as exc:
            raise self._fail(exc, time.perf_counter(), 0) from None
        start = time.perf_counter()
        system, contents = self.to_contents(messages)
        config = types.GenerateContentConfig(
            system_instruction=system or None,
            tools=[types.Tool(function_declarations=[
                types.FunctionDeclaration(name=t["name"], description=t.get("description"),
                                          parameters_json_schema=t.get("parameters")) for t in tools])] if tools else None,
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        )

        try:
            response, retries = with_retries(
                lambda: client.models.generate_content(model=self.model, contents=contents, config=config),
                self.retries, self.backoff, lambda exc: transient(_status(exc)),
                budget=self.budget)
        except Failed as exc:
            raise self._fail(exc.error, start, exc.retries) from None
        latency = round((time.perf_counter() - start) * 1000, 3)
        usage = response.usage_metadata
        tokens_in = usage.prompt_token_count if usage else None
        tokens_out = ((usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0)) if usage else None
        if not response.candidates:
            reason = getattr(getattr(response, "prompt_feedback", None), "block_reason", None)
            call = ModelCall(self.name, self.model, latency, tokens_in, tokens_out, _name(reason) or "no_candidates",
                             response.model_version, retries)
            raise self._fail(ProviderError(f"Gemini returned no answer (prompt blocked: {_name(reason)})", "blocked"),
                             start, retries, call)
        cand = response.candidates[0]
        finish = _name(cand.finish_reason)
        call = ModelCall(self.name, self.model, latency, tokens_in, tokens_out, finish, response.model_version, retries)
        parts = (cand.content.parts if cand.content else None) or []
        text = "".join(p.text for p in parts if p.text and not p.thought)
        requests = []
        for p in parts:
            if p.function_call is None:
                continue
            fc = p.function_call
            generated = self.new_call_id()  # counted for every call, as ids the model gave are kept
            call_id = fc.id or generated
            if fc.id:
                self._server_ids.add(fc.id)
            requests.append(ToolRequest(call_id, fc.name or "", dict(fc.args or {})))
        if finish == "MALFORMED_FUNCTION_CALL" and not requests:
            detail = getattr(cand, "finish_message", None) or "no detail given"
            raise self._fail(ProviderError(f"model {self.model!r} produced a function call Gemini could not parse "
                                           f"(finish reason MALFORMED_FUNCTION_CALL: {detail})", "bad_tool_args"),
                             start, retries, call)
        if finish in _BLOCKED and not text and not requests:
            raise self._fail(ProviderError(f"Gemini stopped without an answer (finish reason {finish})", "blocked"),
                             start, retries, call)
        if requests and cand.content is not None:
            self._model_turns[_step_key([(r.id, r.name, r.args) for r in requests])] = cand.content
        return ModelStep(text, tuple(requests), call)

    # --- messages ----------------------------------------------------------------------------

    def to_contents(self, messages: list[dict[str, Any]]) -> tuple[str, list[Any]]:
        """Provider-neutral messages as (system instruction, Gemini `Content`s)."""
        from google.genai import types

        system: list[str] = []
        contents: list[Any] = []
        for m in messages:
            role = m["role"]
            if role == "system":
                system.append(m.get("content") or "")
            elif role == "tool":
                response = _as_object(m.get("content"))
                fr = types.FunctionResponse(name=m.get("name"), response=response,
                                            id=m.get("tool_call_id") if m.get("tool_call_id") in self._server_ids else None)
                part = types.Part(function_response=fr)
                last = contents[-1] if contents else None
                if last is not None and last.role == "user" and last.parts and last.parts[-1].function_response:
                    last.parts.append(part)  # parallel calls are answered together in one turn
                else:
                    contents.append(types.Content(role="user", parts=[part]))
            elif role == "assistant" and m.get("tool_calls"):
                key = _step_key([(tc["id"], tc["name"], tc.get("args")) for tc in m["tool_calls"]])
                if key in self._model_turns:
                    contents.append(self._model_turns[key])
                    continue
                parts = [types.Part(text=m["content"])] if m.get("content") else []
                parts += [types.Part(function_call=types.FunctionCall(
                    name=tc["name"], args=tc.get("args") or {}, id=tc["id"] if tc["id"] in self._server_ids else None))
                    for tc in m["tool_calls"]]
                contents.append(types.Content(role="model", parts=parts))
            else:
                contents.append(types.Content(role="model" if role == "assistant" else "user",
                                              parts=[types.Part(text=m.get("content") or "")]))
        return "\n\n".join(s for s in system if s), contents

    # --- faults ------------------------------------------------------------------------------

    def _fail(self, exc: BaseException, start: float, retries: int, call: ModelCall | None = None) -> ProviderError:
        """One ProviderError per fault, with a message that names the fix and never the key."""
        return failure_of(self, exc, self._describe, start, retries,
                          [self.__key, *(self.settings.get(v) for v in KEY_ENVS)], call)

    def _describe(self, exc: BaseException, retries: int) -> tuple[str, str]:
        return describe(exc, _status(exc), str(getattr(exc, "message", None) or exc)[:300], retries,
                        _GeminiWording(self))


class _GeminiWording(Wording):
    """Gemini's own words for the faults `http.describe` tells apart (the service is "Gemini"; the server
    it was reached at, `where`, only for transport faults), and its 400 for a bad key."""

    def __init__(self, provider: GeminiProvider):
        super().__init__(provider.where, f"{BASE_URL_ENV} (or the base_url option)", provider.timeout,
                         provider.model)
        self.configured_url = provider.base_url is not None
        self.key_var = provider._key_var if provider._key_var != "api_key" else f"the api_key option (or {KEY_ENVS[0]})"

    def client_error(self, exc, code, detail):
        if code == 400 and ("API key" in detail or "API_KEY" in str(exc)):
            return "auth_error", self.auth(code, detail)
        return None

    def auth(self, code, detail):
        return (f"Gemini refused the API key ({code}: {detail}); set {self.key_var} to a valid key "
                "from https://aistudio.google.com/apikey")

    def unknown_model(self, detail):
        return (f"Gemini has no model {self.model!r} (404: {detail}); pick an available model, e.g. "
                f"{DEFAULT_MODEL} (list: {MODELS_URL})")

    def rate_limited(self, tries, detail):
        return f"Gemini is rate limiting this key (429){tries}: {detail}; wait and retry"

    def server_error(self, code, tries, detail):
        return f"Gemini failed ({code}){tries}: {detail}"

    def rejected(self, code, detail):
        return f"Gemini rejected the request ({code}): {detail}"

    def unreachable(self):
        return f"cannot connect to {self.where}: check the network" + (f" or {BASE_URL_ENV}" if self.configured_url else "")


@functools.lru_cache(maxsize=8)
def _shared_client(api_key: str, base_url: str | None, timeout_ms: int, api_version: str,
                   auth: tuple[str, str] | None = None):
    """One client per configuration: building one costs ~150 ms (TLS set-up), more than a loopback turn."""
    from google import genai  # the SDK is imported only here, and only when used
    from google.genai import types

    http = types.HttpOptions(base_url=base_url, timeout=timeout_ms, api_version=api_version,
                             headers=basic_auth_headers(auth), client_args=dict(NO_REDIRECTS))
    return genai.Client(api_key=api_key, vertexai=False, http_options=http)


def _step_key(calls: list[tuple[str, str, Any]]) -> tuple[Any, ...]:
    """A model step by its calls' ids, names and arguments: ids alone are numbered per provider, so an earlier
    turn of a conversation (another provider) may have used the same ones for other calls."""
    return tuple((i, name, json.dumps(args or {}, sort_keys=True, default=str)) for i, name, args in calls)


def _status(exc: BaseException) -> int | None:
    code = getattr(exc, "code", None)
    return code if isinstance(code, int) and code > 0 else None


def _name(value: Any) -> str | None:
    if value is None:
        return None
    return str(getattr(value, "value", value))


def _as_object(content: Any) -> dict[str, Any]:
    """A tool message's content as the object a `functionResponse` needs."""
    try:
        value = json.loads(content) if isinstance(content, str) else content
    except ValueError:
        value = content
    return value if isinstance(value, dict) else {"output": value}
