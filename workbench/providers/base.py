"""The provider interface and registry (docs/design.md §7).

A provider implements one method, `complete(messages, tools)`, returning the model's next step:
text and/or tool calls plus usage. The agent loop owns everything else. Built-in providers register
through `register_provider`, exactly as a provider written by a user would.

Messages are provider-neutral dicts:
``{"role": "system"|"user"|"assistant"|"tool", "content": str}``; assistant messages may carry
``"tool_calls": [{"id", "name", "args"}]`` and tool messages carry ``"tool_call_id"`` and ``"name"``.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Iterable, Mapping, TypeVar

from ..registry import Registry
from ..types import ModelCall

T = TypeVar("T")


@dataclass(frozen=True)
class ToolRequest:
    """A tool call the model asked for. `args` is None when the model's arguments did not parse."""

    id: str
    name: str
    args: dict[str, Any] | None
    raw_args: str | None = None


@dataclass(frozen=True)
class ModelStep:
    text: str = ""
    tool_calls: tuple[ToolRequest, ...] = ()
    call: ModelCall = field(default_factory=lambda: ModelCall("unknown"))


@dataclass(frozen=True)
class Readiness:
    """Whether a provider can run in an environment; `hint` names what to set when it cannot."""

    ok: bool
    hint: str = ""

    def __bool__(self) -> bool:
        return self.ok


class Provider(ABC):
    """One chat model behind one method.

    Capabilities are declared on the class and read by the core, never by provider name:
    - `supports_tools`: native tool calling. `Session.ask` refuses agent mode for a provider with
      neither this nor `supports_json_schema` (it names excerpt mode instead); the app offers it
      only excerpt mode.
    - `supports_json_schema`: its output can be constrained by a JSON Schema.
    - `options_schema`: a JSON Schema object of the keyword options `__init__` takes besides `model`
      (`options.py`): `get_provider` checks options against it, the CLI parses `--option` with it,
      the app's sidebar draws one input per property, and `writeOnly` options are never recorded.
    - `is_configured(env)`: whether it can run in that environment; the hint names the variable to
      set. The app warns with it; the notebooks and `analysis` offer only configured providers.
    - `default_tool_protocol`: the tool protocol of an agent turn that names none (`native` tool
      calls, or schema-forced `json-steps` through `complete_json`, see `steps.py`).
    - `batch_by_default`: whether batches that run every configured provider over every question ×
      retriever (`analysis.configured_providers`, notebook 02) include it. False for a model run on
      this machine's CPU, far too slow for that: such a provider is named explicitly instead.
    - `free_calls`: a call costs no model time, money or quota (no model at all, like `offline`). The
      app verifies such a turn by ablation at once; for any other it first says how many extra calls
      the verification will make and asks.
    - `model_is_path`: its model is a file on this machine (a GGUF): the app accepts a typed model
      only inside the allowed roots (`paths.confine`, docs/security.md), as it does a corpus path.
      An option that names a server says so with `"format": "uri"` in `options_schema`; the app
      accepts a typed one only when the operator allows it (`paths.confine_server`).
    - `max_concurrent_turns`: how many turns it can usefully answer at once in one process (None: no
      limit). `eval --concurrency N` runs at most this many workers (`batch.run_eval`). 1 for a model
      held in-process with one slot (`llamacpp`): parallel turns would only queue for it and evict each
      other's prompt cache, so they run one after another, exactly as with `--concurrency 1`.
    - `context_tokens`: the model's context in tokens, as far as the provider can state it without asking
      (None: unknown, or no model at all). `context_window()` derives the real one where the provider can
      (`llamacpp`: the context it loads the model with); a conversation's history budget is a share of it
      (`conversation.token_budget`, docs/providers.md "Conversations").
    The defaults: tools yes, schema no, options anything (nothing drawn), always configured, native,
    in batches, a model name (not a file), no concurrency limit, calls that cost, an unknown context.
    """

    name: str = "base"
    #: Shown wherever the provider is named ("offline (no LLM)").
    label: str = "base"
    supports_tools: ClassVar[bool] = True
    supports_json_schema: ClassVar[bool] = False
    options_schema: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}
    default_tool_protocol: ClassVar[str] = "native"
    batch_by_default: ClassVar[bool] = True
    free_calls: ClassVar[bool] = False
    model_is_path: ClassVar[bool] = False
    max_concurrent_turns: ClassVar[int | None] = None
    context_tokens: ClassVar[int | None] = None

    def __init__(self, model: str | None = None, **options: Any):
        self.model = model
        self.options = options
        self._calls = 0

    def new_call_id(self) -> str:
        """An id for a tool call the model gave none: `<provider name>-<n>`, n counting this provider's calls."""
        self._calls += 1
        return f"{self.name}-{self._calls}"

    @classmethod
    def is_configured(cls, env: Mapping[str, str]) -> Readiness:
        """Whether the provider can run with the environment `env`; the hint names the variable to set."""
        return Readiness(True)

    @abstractmethod
    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelStep:
        """Return the model's next step for `messages`, given the tool declarations `tools`."""

    def complete_json(self, messages: list[dict[str, Any]], schema: dict[str, Any]) -> ModelStep:
        """The model's next message as text forced to match the JSON Schema `schema` (no tools offered).

        Implemented by providers that declare `supports_json_schema`; the json-steps protocol calls it.
        """
        raise NotImplementedError(f"provider {self.name!r} cannot constrain its output to a JSON schema")

    def context_window(self) -> int | None:
        """The model's context in tokens (default: the declared `context_tokens`); may load the model."""
        return self.context_tokens

    @property
    def model_label(self) -> str | None:
        """The model as shown to people; a provider may say more than its name (e.g. that it is the default)."""
        return self.model

    def list_models(self) -> list[str]:
        """Installed or available models, for pickers; empty when the provider cannot list."""
        return []


def this_turn(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages of the turn being answered: those after its question, the last `user` message. A
    conversation's earlier turns come before it (docs/design.md §11): a provider that reads the steps of its
    turn from `messages` (json-steps; the offline agent) reads them from here, and its question is
    `messages[-len(this_turn(messages)) - 1]`."""
    last = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)
    return messages[last + 1:]


ProviderFactory = Callable[..., Provider]
#: Built-ins in `providers/builtins.py`; plug-ins through $WORKBENCH_PLUGINS or the entry-point group.
_PROVIDERS: Registry[ProviderFactory] = Registry("provider", f"{__package__}.builtins", "workbench.providers")
#: Register a provider class or factory under a name; usable as a class decorator.
register_provider = _PROVIDERS.register
provider_names = _PROVIDERS.names


def provider_factory(name: str) -> ProviderFactory:
    """The class (or factory) registered as `name`, whose declared capabilities can be read without
    building a provider; `UnknownNameError` listing the known names otherwise."""
    return _PROVIDERS.factory(name)


def declared(name: str, capability: str) -> Any:
    """A capability the provider `name` declares (`supports_tools`, `supports_json_schema`,
    `options_schema`, `label`, …); a plain factory function declares nothing and gets `Provider`'s default."""
    return getattr(provider_factory(name), capability, getattr(Provider, capability))


def readiness(name: str, env: Mapping[str, str] | None = None) -> Readiness:
    """Whether the provider `name` can run with `env` (default: the process environment), and what to set."""
    return declared(name, "is_configured")(os.environ if env is None else env)


def get_provider(name: str, model: str | None = None, **options: Any) -> Provider:
    """Build the provider `name`; options are checked against its `options_schema` first, so an option
    it does not take (e.g. the offline `faults` given to `ollama`) is a `ProviderOptionError`. An option
    given as None is not given: the provider keeps its own default."""
    from .options import check_options

    check_options(name, declared(name, "options_schema"), options)
    return _PROVIDERS.build(name, model=model, **{k: v for k, v in options.items() if v is not None})


# --- helpers shared by network providers -----------------------------------------------------

#: Defaults for network providers; each can be overridden per provider option or environment.
TIMEOUT_ENV, RETRIES_ENV, BACKOFF_ENV = "WORKBENCH_PROVIDER_TIMEOUT", "WORKBENCH_PROVIDER_RETRIES", "WORKBENCH_PROVIDER_BACKOFF"
BUDGET_ENV = "WORKBENCH_TURN_BUDGET"
DEFAULT_RETRIES = 3  # after the first attempt, for 429 and 5xx only
DEFAULT_BACKOFF = 1.0  # seconds; attempt n waits backoff * 2**n (1, 2, 4 s by default)
MAX_BACKOFF = 30.0  # seconds: the longest wait between two attempts, and the largest `backoff`
#: A server's Retry-After is honoured up to this many seconds; asking for longer ends the turn instead.
MAX_RETRY_AFTER = 60.0
#: The largest `timeout` (seconds per request) and `retries` a network provider takes.
MAX_TIMEOUT, MAX_RETRIES = 600.0, 10
#: Seconds one turn may spend in a network provider's requests and waits (`budget`): by default, and at most.
DEFAULT_BUDGET, MAX_BUDGET = 900.0, 3600.0


def network_options_schema(**properties: dict[str, Any]) -> dict[str, Any]:
    """The `options_schema` of a network provider: its own `properties` plus timeout, retries, backoff, budget."""
    return {"type": "object", "additionalProperties": False, "properties": {**properties, **NETWORK_OPTIONS}}


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


def backoff_delay(backoff: float, attempt: int) -> float:
    """Seconds to wait before retry `attempt` (from 0): `backoff` doubled each time, at most `MAX_BACKOFF`."""
    return min(MAX_BACKOFF, backoff * 2 ** attempt)


def network_settings(timeout: float | None, retries: int | None, backoff: float | None, budget: float | None,
                     default_timeout: float) -> tuple[float, int, float, float]:
    """(timeout, retries, backoff, budget) of a network provider: each option if given, else its variable,
    else the default, each within its bounds in `NETWORK_OPTIONS`."""
    return (setting(timeout, TIMEOUT_ENV, default_timeout, NETWORK_OPTIONS["timeout"], "timeout"),
            int(setting(retries, RETRIES_ENV, DEFAULT_RETRIES, NETWORK_OPTIONS["retries"], "retries")),
            setting(backoff, BACKOFF_ENV, DEFAULT_BACKOFF, NETWORK_OPTIONS["backoff"], "backoff"),
            setting(budget, BUDGET_ENV, DEFAULT_BUDGET, NETWORK_OPTIONS["budget"], "budget"))


def setting(value: Any, env: str, default: float, prop: Mapping[str, Any] | None = None,
            name: str | None = None) -> float:
    """`value` if given, else the number in `$env`, else `default` (a bad number names the variable).

    With `prop` (the option's `options_schema` property), a given or configured value outside its bounds
    is a `config_error` naming the option or variable, the value and the allowed range — raised before
    the provider allocates or sends anything.
    """
    from ..errors import ProviderError

    if value is not None:
        where, number = f"option {name or env!r}", value
    else:
        raw = os.environ.get(env, "").strip()
        if not raw:
            return default
        try:
            number = float(raw)
        except ValueError:
            raise ProviderError(f"{env}={raw!r} is not a number", status="config_error") from None
        where = f"{env}={raw!r}"
        if prop is not None and prop.get("type") == "integer" and number.is_integer():
            number = int(number)
    if prop is not None:
        from .options import problem

        why = problem(prop, number)
        if why:
            raise ProviderError(f"{where}: {why}", status="config_error")
    return float(number)


class Failed(Exception):
    """`with_retries` gave up: `error` is the provider's last exception, `retries` how many retries it took."""

    def __init__(self, error: BaseException, retries: int):
        super().__init__(str(error))
        self.error = error
        self.retries = retries


#: Inside `turn_clock`: [when the turn's first model request started, or None before it].
_TURN_STARTED: contextvars.ContextVar[list[float | None] | None] = contextvars.ContextVar("turn_started", default=None)


@contextlib.contextmanager
def turn_clock():
    """One turn (the agent opens one per turn): the time budget of every provider call inside counts from the
    turn's first model request, so building a retrieval index before it costs no budget."""
    token = _TURN_STARTED.set([None])
    try:
        yield
    finally:
        _TURN_STARTED.reset(token)


def with_retries(fn: Callable[[], T], retries: int, backoff: float, transient: Callable[[BaseException], bool],
                 sleep: Callable[[float], None] = time.sleep,
                 retry_after: Callable[[BaseException], float | None] | None = None,
                 budget: float | None = None) -> tuple[T, int]:
    """Call `fn`; while it raises a `transient` error (429, 5xx), wait `backoff * 2**n` and retry, at most
    `retries` times. Returns the result and the number of retries; any failure raises `Failed`.

    `retry_after(exc)` may return the wait the server asked for (HTTP Retry-After): it replaces the
    backoff, and a wait longer than `MAX_RETRY_AFTER` gives up at once rather than hang the turn.

    `budget` (seconds) bounds the whole turn (from its first model request, see `turn_clock`; outside a
    turn, from this call): no attempt starts once it is spent, and no wait runs past it; either ends the
    turn with status `over_budget`. A turn's requests therefore end within its budget plus at most one
    request's timeout.
    """
    turn = _TURN_STARTED.get()
    if turn is not None and turn[0] is None:
        turn[0] = time.perf_counter()
    started = turn[0] if turn is not None else time.perf_counter()
    deadline = None if budget is None else started + budget
    attempt = 0
    while True:
        if deadline is not None and time.perf_counter() >= deadline:
            raise Failed(_over_budget(budget, attempt, None), attempt)
        try:
            return fn(), attempt
        except Exception as exc:
            if attempt >= retries or not transient(exc):
                raise Failed(exc, attempt) from None
            asked = retry_after(exc) if retry_after is not None else None
            if asked is not None and asked > MAX_RETRY_AFTER:
                raise Failed(exc, attempt) from None
            wait = asked if asked is not None else backoff_delay(backoff, attempt)
            if deadline is not None and time.perf_counter() + wait >= deadline:
                raise Failed(_over_budget(budget, attempt + 1, exc), attempt) from None
            sleep(wait)
            attempt += 1


def _over_budget(budget: float, attempts: int, last: BaseException | None) -> "ProviderError":
    from ..errors import ProviderError

    tried = f" after {attempts} attempt{'s' if attempts != 1 else ''}" if attempts else " before the next model call"
    why = f" (the last answer: {type(last).__name__}: {str(last)[:200]})" if last is not None else ""
    return ProviderError(f"the turn used up its time budget of {budget:g} s{tried}{why}; retry later, or raise "
                         f"the budget option or ${BUDGET_ENV} (at most {MAX_BUDGET:g} s)", status="over_budget")


def failure_of(provider: Provider, exc: BaseException, describe: Callable[[BaseException, int], tuple[str, str]],
               started: float, retries: int, secrets: Iterable[str | None],
               call: ModelCall | None = None) -> "ProviderError":
    """`failure` for an exception that ends a turn: a ProviderError raised on the way keeps its status and
    message; any other is put in words by the provider's own `describe(exc, retries)`."""
    from ..errors import ProviderError

    status, message = (exc.status, str(exc)) if isinstance(exc, ProviderError) else describe(exc, retries)
    return failure(provider, status, message, started, retries, secrets, call)


def failure(provider: Provider, status: str, message: str, started: float, retries: int,
            secrets: Iterable[str | None], call: ModelCall | None = None) -> "ProviderError":
    """The ProviderError that ends a turn: redacted message (the given secrets, and the credentials of every
    URL the provider was configured with), plus the failed call (latency, retries) for the record."""
    from ..errors import ProviderError

    return ProviderError(scrub_secrets(message, [*secrets, *provider_credentials(provider)]), status=status,
                         call=call or ModelCall(provider.name, provider.model,
                                                round((time.perf_counter() - started) * 1000, 3),
                                                finish_reason="error", retries=retries))


_KEY_PARAM = re.compile(r"(?i)([?&](?:key|api_key|apikey)=)[^&\s'\"]+")
_BEARER = re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}")
# scheme://userinfo@ — userinfo runs to the *last* @ before the host (an unencoded @ in a password).
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#\s@]*(?:@[^/?#\s@]*)*@")
# The same at the start of a configured URL that may lack its scheme (OLLAMA_HOST=user:pass@host:11434).
_CONFIGURED_USERINFO = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*://)?([^/?#\s]*)@")
#: Environment variables that name a server; credentials in their userinfo are secrets everywhere.
_URL_ENV_SUFFIXES = ("_HOST", "_URL", "_ENDPOINT")
_URL_ATTRIBUTES = ("url", "host", "endpoint", "server")


def split_userinfo(url: str | None) -> tuple[str | None, tuple[str, str] | None]:
    """(`url` without its `user:password@`, (user, password) percent-decoded, or None). SDKs get the bare URL
    and the credentials as HTTP basic auth, so no client, log line or exception ever shows them."""
    from urllib.parse import unquote

    if not url:
        return url, None
    m = _CONFIGURED_USERINFO.match(url.strip())
    if not m or not m.group(1):
        return url, None
    user, _, password = m.group(1).partition(":")
    return url.strip()[:m.start(1)] + url.strip()[m.end():], (unquote(user), unquote(password))


def basic_auth_headers(auth: tuple[str, str] | None) -> dict[str, str] | None:
    """The `Authorization: Basic …` header for (user, password) from `split_userinfo`, for SDKs that take headers."""
    import base64

    return {"Authorization": "Basic " + base64.b64encode(":".join(auth).encode()).decode()} if auth else None


def url_credentials(url: str | None) -> list[str]:
    """The secret parts of a configured URL: its userinfo, password and user name, raw and decoded."""
    bare, creds = split_userinfo(url)
    if creds is None:
        return []
    raw = _CONFIGURED_USERINFO.match(url.strip()).group(1)
    user, password = creds
    if password:  # a user name beside a password is not a secret; alone it often is a token
        return [raw, raw.partition(":")[2], password]
    return [raw, user]


def provider_credentials(provider: object) -> list[str]:
    """Credentials in any URL-like attribute of `provider` (host, base_url, endpoint …), whatever the provider."""
    out: list[str] = []
    for name, value in vars(provider).items():
        if isinstance(value, str) and any(word in name.lower() for word in _URL_ATTRIBUTES):
            out += url_credentials(value)
    return out


def _env_credentials() -> list[str]:
    return [c for name, value in os.environ.items() if name.endswith(_URL_ENV_SUFFIXES) and "@" in value
            for c in url_credentials(value)]


def scrub_secrets(text: str, secrets: Iterable[str | None] = ()) -> str:
    """`text` with every secret, URL userinfo (`http://user:pass@…`), credential of a configured server URL
    (`$OLLAMA_HOST`, `$GEMINI_BASE_URL`, `$OPENAI_BASE_URL`, any `*_HOST` / `*_URL`), `?key=` URL parameter and
    bearer token replaced by `[redacted]`. Every provider failure goes through it (`failure`), as does the
    agent's message for an unexpected provider exception."""
    for secret in sorted({s for s in (*secrets, *_env_credentials()) if s and len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, "[redacted]")
    text = _USERINFO.sub(r"\1[redacted]@", text)
    text = _KEY_PARAM.sub(r"\1[redacted]", text)
    return _BEARER.sub(r"\1[redacted]", text)


def redirect_refused(where: str, code: int | None, exc: BaseException, setting: str) -> tuple[str, str] | None:
    """("redirect_refused", message) when the server answered a redirect (3xx), else None.

    No provider's client follows a redirect (`paths.NO_REDIRECTS`, docs/security.md): the request went to
    the configured or allowed server only, and the turn ends instead of sending it on.
    """
    if code is None or not 300 <= code < 400:
        return None
    headers = getattr(getattr(exc, "response", None), "headers", None)
    location = headers.get("location") if headers is not None else None
    to = f" to {location}" if location else ""
    return "redirect_refused", (f"{where} answered {code}, a redirect{to}; redirects are never followed, so "
                                f"nothing was sent there: set {setting} to the server that answers itself")


def is_context_overflow(kind: str, message: str) -> bool:
    """The prompt does not fit the model's context, by the server's error (llama.cpp `exceed_context_size_error`,
    OpenAI `context_length_exceeded`, Gemini's "input token count … exceeds the maximum number of tokens", Ollama's
    "the input length exceeds the context length")."""
    text = f"{kind} {message}".lower()
    return any(s in text for s in ("exceed_context_size", "context_length_exceeded", "exceeds the available context",
                                   "maximum context length", "exceeds the maximum number of tokens",
                                   "exceeds the context length", "exceeds context length"))


def exception_kind(exc: BaseException) -> str | None:
    """"timeout" or "connection" for transport errors of any HTTP stack (httpx, httpx2, requests), else None."""
    names = {c.__name__ for c in type(exc).__mro__}
    if names & {"TimeoutException", "Timeout", "TimeoutError", "ReadTimeout", "ConnectTimeout"}:
        return "timeout"
    if names & {"ConnectError", "ConnectionError", "RemoteProtocolError", "NetworkError"}:
        return "connection"
    return None
