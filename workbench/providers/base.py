"""The provider interface and registry (DESIGN.md §7).

A provider implements one method, `complete(messages, tools)`, returning the model's next step:
text and/or tool calls plus usage. The agent loop owns everything else. Built-in providers register
through `register_provider`, exactly as a provider written by a user would.

Messages are provider-neutral dicts:
``{"role": "system"|"user"|"assistant"|"tool", "content": str}``; assistant messages may carry
``"tool_calls": [{"id", "name", "args"}]`` and tool messages carry ``"tool_call_id"`` and ``"name"``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import UnknownNameError
from ..types import ModelCall


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


class Provider(ABC):
    """One chat model behind one method."""

    name: str = "base"
    #: Shown wherever the provider is named ("offline (no LLM)").
    label: str = "base"
    supports_tools: bool = True

    def __init__(self, model: str | None = None, **options: Any):
        self.model = model
        self.options = options

    @abstractmethod
    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelStep:
        """Return the model's next step for `messages`, given the tool declarations `tools`."""

    def list_models(self) -> list[str]:
        """Installed or available models, for pickers; empty when the provider cannot list."""
        return []


ProviderFactory = Callable[..., Provider]
_REGISTRY: dict[str, ProviderFactory] = {}


def register_provider(name: str, factory: ProviderFactory | None = None):
    """Register a provider class or factory under `name`; usable as a class decorator."""

    def _register(f: ProviderFactory) -> ProviderFactory:
        _REGISTRY[name] = f
        return f

    return _register(factory) if factory is not None else _register


def provider_names() -> list[str]:
    from . import builtins  # noqa: F401

    return sorted(_REGISTRY)


def get_provider(name: str, model: str | None = None, **options: Any) -> Provider:
    names = provider_names()
    if name not in _REGISTRY:
        raise UnknownNameError("provider", name, names)
    return _REGISTRY[name](model=model, **options)
