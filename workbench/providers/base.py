"""The provider interface and registry (docs/design.md §7).

Only the interface: what network providers share (options, retries, the fault ladder) is `http.py`,
options and their checks `options.py`, secrets `..redact`.

A provider implements one method, `complete(messages, tools)`, returning the model's next step:
text and/or tool calls plus usage. The agent loop owns everything else. Built-in providers register
through `register_provider`, exactly as a provider written by a user would.

Messages are provider-neutral dicts:
``{"role": "system"|"user"|"assistant"|"tool", "content": str}``; assistant messages may carry
``"tool_calls": [{"id", "name", "args"}]`` and tool messages carry ``"tool_call_id"`` and ``"name"``.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Mapping

from ..config import Settings, environment
from ..registry import Registry
from ..types import ModelCall
from .options import check_options


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
class ContextInfo:
    """The model's context in tokens (None: not known) and where the figure came from, in words (recorded with
    every turn: "the context_tokens option", "the server's /props", "assumed: …")."""

    tokens: int | None
    source: str


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
    - `default_model`: the model it runs when given none, in words for help texts (None: it takes no model).
    - `context_tokens`: the model's context in tokens, as far as the provider can state it without asking
      (None: unknown, or no model at all). `context_window()` derives the real one where the provider can
      (`llamacpp`: the context it loads the model with); a conversation's history budget is a share of it
      (`context_policy.token_budget`, docs/providers.md "Conversations"), and every tool result is sized to what is
      left of it (`agent._Budget`). `context_info()` says where the figure came from (an option, the server).
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
    default_model: ClassVar[str | None] = None
    context_tokens: ClassVar[int | None] = None
    #: What people should know before asking its default model in agent mode (shown by the app), or None.
    agent_mode_note: ClassVar[str | None] = None

    def __init__(self, model: str | None = None, *, settings: Settings | None = None, **options: Any):
        self.model = model
        self.options = options
        self._settings = settings
        self._calls = 0

    @property
    def settings(self) -> Settings:
        """The environment as the edge read it (`config.Settings`), for the variables the provider names itself;
        read when first needed if the provider was built without it."""
        if self._settings is None:
            self._settings = Settings.from_env()
        return self._settings

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

    def context_info(self) -> ContextInfo:
        """`context_window()` with where it came from; a provider that asks its server says so (`openai`, `ollama`)."""
        tokens = self.context_window()
        return ContextInfo(tokens, f"declared by the {self.name} provider" if tokens else "not known")

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
    return declared(name, "is_configured")(environment() if env is None else env)


def get_provider(name: str, model: str | None = None, *, settings: Settings | None = None,
                 **options: Any) -> Provider:
    """Build the provider `name`; options are checked against its `options_schema` first, so an option
    it does not take (e.g. the offline `faults` given to `ollama`) is a `ProviderOptionError`. An option
    given as None is not given: the provider keeps its own default. `settings` (the environment as the edge read
    it) goes to a provider that takes it; without it, the provider reads the environment when it is built."""
    check_options(name, declared(name, "options_schema"), options)
    given = {k: v for k, v in options.items() if v is not None}
    if settings is not None and _takes_settings(provider_factory(name)):
        given["settings"] = settings
    return _PROVIDERS.build(name, model=model, **given)


def _takes_settings(factory: ProviderFactory) -> bool:
    """Whether `factory` takes the `settings` the edge read (the built-in providers do; a plugin may not)."""
    try:
        return "settings" in inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return False
