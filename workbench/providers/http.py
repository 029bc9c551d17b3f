"""What every network provider shares: its timeout/retry/backoff/budget options and the
ladder from a failed request (HTTP status or transport error) to a status and a message.

A provider keeps only its own wording (a `Wording` subclass: how it names its server, what to set, and
the faults only it tells apart); `describe` decides which fault applies, in the same order for all:
a redirect (never followed, `paths.NO_REDIRECTS`), the provider's own `first` faults, 401/403 → `auth_error`,
404 → `unknown_model`, 429 → `rate_limited`, 5xx → `server_error`, the provider's own other 4xx
(`client_error`), any other status → `provider_error`; with no status: `timeout`, `connection_error`, else
`provider_error`. Retries are `retries.with_retries` (429 and 5xx, exponential back-off, the turn's time budget),
and `failure` puts the result in a `ProviderError` whose message went through `redact.scrub_secrets`.
"""

from __future__ import annotations

import base64
import time
from typing import Any, Callable, Iterable

from ..config import env
from ..errors import ProviderError
from ..redact import provider_credentials, scrub_secrets
from ..retries import BUDGET_ENV, DEFAULT_BACKOFF, DEFAULT_BUDGET, DEFAULT_RETRIES, MAX_BACKOFF, MAX_BUDGET
from ..types import ModelCall
from .base import Provider
from .options import setting

#: Defaults for network providers; each can be overridden per provider option or environment.
TIMEOUT_ENV, RETRIES_ENV, BACKOFF_ENV = "WORKBENCH_PROVIDER_TIMEOUT", "WORKBENCH_PROVIDER_RETRIES", "WORKBENCH_PROVIDER_BACKOFF"
#: The largest `timeout` (seconds per request) and `retries` a network provider takes.
MAX_TIMEOUT, MAX_RETRIES = 600.0, 10

#: The `options_schema` properties every network provider takes (unset: the environment, else the default).
NETWORK_OPTIONS: dict[str, dict[str, Any]] = {
    "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_TIMEOUT, "title": "Timeout (s)",
                "description": f"seconds per request (default ${TIMEOUT_ENV}, else the provider's default)"},
    "retries": {"type": "integer", "minimum": 0, "maximum": MAX_RETRIES, "title": "Retries",
                "description": f"retries after a 429 or 5xx (default ${RETRIES_ENV}, else {DEFAULT_RETRIES})"},
    "backoff": {"type": "number", "minimum": 0, "maximum": MAX_BACKOFF, "title": "Backoff (s)",
                "description": f"first wait before a retry, doubled each time up to {MAX_BACKOFF:g} s (default "
                               f"${BACKOFF_ENV}, else {DEFAULT_BACKOFF:g})"},
    "budget": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_BUDGET, "title": "Turn budget (s)",
               "description": f"seconds a whole turn may spend on requests and waits; then it ends with status "
                              f"over_budget (default ${BUDGET_ENV}, else {DEFAULT_BUDGET:g})"},
}


#: The largest `context_tokens` a provider takes (Gemini's models have 1,048,576), and the variable that sets it.
MAX_CONTEXT_TOKENS, CONTEXT_TOKENS_ENV = 10_000_000, "WORKBENCH_PROVIDER_CONTEXT_TOKENS"


def context_tokens_option(how: str) -> dict[str, Any]:
    """The `context_tokens` property of a provider's `options_schema` (`how`: what it does besides being counted)."""
    return {"type": "integer", "minimum": 256, "maximum": MAX_CONTEXT_TOKENS, "title": "Context (tokens)",
            "description": f"the model's context in tokens, which every request and tool result is sized to{how} "
                           f"(default ${CONTEXT_TOKENS_ENV}, else what the server reports, else an assumption)"}


def context_tokens_setting(value: int | None, prop: dict[str, Any]) -> tuple[int | None, str]:
    """(tokens, source) of the `context_tokens` option, else `$CONTEXT_TOKENS_ENV`, else (None, "")."""
    if value is None and env(CONTEXT_TOKENS_ENV) is None:
        return None, ""
    tokens = int(setting(value, CONTEXT_TOKENS_ENV, 0, prop, "context_tokens"))
    return tokens, "the context_tokens option" if value is not None else f"${CONTEXT_TOKENS_ENV}"


def network_options_schema(**properties: dict[str, Any]) -> dict[str, Any]:
    """The `options_schema` of a network provider: its own `properties` plus timeout, retries, backoff, budget."""
    return {"type": "object", "additionalProperties": False, "properties": {**properties, **NETWORK_OPTIONS}}


def network_settings(timeout: float | None, retries: int | None, backoff: float | None, budget: float | None,
                     default_timeout: float) -> tuple[float, int, float, float]:
    """(timeout, retries, backoff, budget) of a network provider: each option if given, else its variable,
    else the default, each within its bounds in `NETWORK_OPTIONS`."""
    return (setting(timeout, TIMEOUT_ENV, default_timeout, NETWORK_OPTIONS["timeout"], "timeout"),
            int(setting(retries, RETRIES_ENV, DEFAULT_RETRIES, NETWORK_OPTIONS["retries"], "retries")),
            setting(backoff, BACKOFF_ENV, DEFAULT_BACKOFF, NETWORK_OPTIONS["backoff"], "backoff"),
            setting(budget, BUDGET_ENV, DEFAULT_BUDGET, NETWORK_OPTIONS["budget"], "budget"))


def basic_auth_headers(auth: tuple[str, str] | None) -> dict[str, str] | None:
    """The `Authorization: Basic …` header for (user, password) from `redact.split_userinfo`, for SDKs that
    take headers."""
    return {"Authorization": "Basic " + base64.b64encode(":".join(auth).encode()).decode()} if auth else None


# --- faults: status and message ---------------------------------------------------------------

def exception_kind(exc: BaseException) -> str | None:
    """"timeout" or "connection" for transport errors of any HTTP stack (httpx, httpx2, requests), else None."""
    names = {c.__name__ for c in type(exc).__mro__}
    if names & {"TimeoutException", "Timeout", "TimeoutError", "ReadTimeout", "ConnectTimeout"}:
        return "timeout"
    if names & {"ConnectError", "ConnectionError", "RemoteProtocolError", "NetworkError"}:
        return "connection"
    return None


def redirect_refused(where: str, code: int | None, exc: BaseException, setting: str) -> tuple[str, str] | None:
    """("redirect_refused", message) when the server answered a redirect (3xx), else None.

    No provider's client follows a redirect (`paths.NO_REDIRECTS`, docs/security.md): the request went to
    the configured or allowed server only, and the turn ends instead of sending it on.
    """
    if code is None or not 300 <= code < 400:
        return None
    # the response: the exception's own (openai, httpx), else the one it was raised from (the Ollama client raises
    # its ResponseError from httpx's HTTPStatusError, `from None`, which still keeps it as the context)
    response = getattr(exc, "response", None) or getattr(exc.__context__, "response", None)
    headers = getattr(response, "headers", None)
    location = headers.get("location") if headers is not None else None
    to = f" to {location}" if location else ""
    return "redirect_refused", (f"{where} answered {code}, a redirect{to}; redirects are never followed, so "
                                f"nothing was sent there: set {setting} to the server that answers itself")


class Wording:
    """How one network provider words each fault `describe` tells apart. `where` names the server in
    messages ("Ollama at http://…", "the OpenAI API"); `setting` is what to set to point at another
    server. A subclass overrides the messages it words differently and may tell apart faults of its own:
    `first` (checked before the shared statuses) and `client_error` (a 4xx the ladder gives no name)."""

    def __init__(self, where: str, setting: str, timeout: float, model: str | None):
        self.where, self.setting, self.timeout, self.model = where, setting, timeout, model

    def first(self, exc: BaseException, code: int | None, detail: str) -> tuple[str, str] | None:
        return None

    def client_error(self, exc: BaseException, code: int, detail: str) -> tuple[str, str] | None:
        return None

    def auth(self, code: int, detail: str) -> str:
        return f"{self.where} refused the request ({code}: {detail})"

    def unknown_model(self, detail: str) -> str:
        return f"{self.where} has no model {self.model!r} (404: {detail})"

    def rate_limited(self, tries: str, detail: str) -> str:
        return f"{self.where} is rate limiting requests (429){tries}: {detail}; wait and retry"

    def server_error(self, code: int, tries: str, detail: str) -> str:
        return f"{self.where} failed ({code}){tries}: {detail}"

    def context_overflow(self, detail: str) -> str:
        return (f"the conversation does not fit model {self.model!r}'s context ({detail}); lower k, or start a new "
                "conversation")

    def rejected(self, code: int, detail: str) -> str:
        return f"{self.where} rejected the request ({code}): {detail}"

    def timed_out(self) -> str:
        return (f"{self.where} did not answer within {self.timeout:g} s (model {self.model!r}); retry, or raise "
                f"{TIMEOUT_ENV}")

    def unreachable(self) -> str:
        return f"cannot connect to {self.where}"

    def unexpected(self, exc: BaseException, detail: str) -> str:
        return f"unexpected answer from {self.where}: {type(exc).__name__}: {detail}"


def is_context_overflow(kind: str | None, message: str) -> bool:
    """The prompt does not fit the model's context, by the server's error (llama.cpp `exceed_context_size_error`,
    OpenAI `context_length_exceeded`, Gemini's "input token count … exceeds the maximum number of tokens", Ollama's
    "the input length exceeds the context length")."""
    text = f"{kind or ''} {message}".lower()
    return any(s in text for s in ("exceed_context_size", "context_length_exceeded", "exceeds the available context",
                                   "maximum context length", "exceeds the maximum number of tokens",
                                   "exceeds the context length", "exceeds context length"))


def describe(exc: BaseException, code: int | None, detail: str, retries: int, words: Wording,
             kind: Callable[[BaseException], str | None] = exception_kind) -> tuple[str, str]:
    """(status, message) for a request that failed with `exc` (HTTP status `code`, or None for a transport
    error or a response the client could not read), after `retries` retries; the order is the module's."""
    tries = f" after {retries + 1} attempts" if retries else ""
    known = redirect_refused(words.where, code, exc, words.setting) or words.first(exc, code, detail)
    if known:
        return known
    if code in (401, 403):
        return "auth_error", words.auth(code, detail)
    if code == 404:
        return "unknown_model", words.unknown_model(detail)
    if code == 429:
        return "rate_limited", words.rate_limited(tries, detail)
    if code is not None and code >= 500:
        return "server_error", words.server_error(code, tries, detail)
    if code is not None:
        return (words.client_error(exc, code, detail)
                or (("context_overflow", words.context_overflow(detail)) if is_context_overflow(None, detail) else None)
                or ("provider_error", words.rejected(code, detail)))
    how = kind(exc)
    if how == "timeout":
        return "timeout", words.timed_out()
    if how == "connection":
        return "connection_error", words.unreachable()
    return "provider_error", words.unexpected(exc, detail)


def failure_of(provider: Provider, exc: BaseException, describe: Callable[[BaseException, int], tuple[str, str]],
               started: float, retries: int, secrets: Iterable[str | None],
               call: ModelCall | None = None) -> ProviderError:
    """`failure` for an exception that ends a turn: a ProviderError raised on the way keeps its status and
    message; any other is put in words by the provider's own `describe(exc, retries)`."""
    status, message = (exc.status, str(exc)) if isinstance(exc, ProviderError) else describe(exc, retries)
    return failure(provider, status, message, started, retries, secrets, call)


def failure(provider: Provider, status: str, message: str, started: float, retries: int,
            secrets: Iterable[str | None], call: ModelCall | None = None) -> ProviderError:
    """The ProviderError that ends a turn: redacted message (the given secrets, and the credentials of every
    URL the provider was configured with), plus the failed call (latency, retries) for the record."""
    return ProviderError(scrub_secrets(message, [*secrets, *provider_credentials(provider)]), status=status,
                         call=call or ModelCall(provider.name, provider.model,
                                                round((time.perf_counter() - started) * 1000, 3),
                                                finish_reason="error", retries=retries))
