"""Named factories of one kind (providers, retrievers, judges).

Built-ins register through the same `register` hook an outside plug-in uses; `load` (optional)
imports whatever registers them, once per listing, so nothing is imported before it is needed.
"""

from __future__ import annotations

from typing import Callable, Generic, TypeVar

from .errors import UnknownNameError

F = TypeVar("F", bound=Callable)


class Registry(Generic[F]):
    def __init__(self, kind: str, load: Callable[[], None] | None = None):
        self.kind = kind
        self._load = load
        self._factories: dict[str, F] = {}

    def register(self, name: str, factory: F | None = None):
        """Register `factory` under `name`; without a factory, a decorator."""

        def _register(f: F) -> F:
            self._factories[name] = f
            return f

        return _register(factory) if factory is not None else _register

    def setdefault(self, name: str, factory: F) -> None:
        """Register unless `name` is taken (entry points never shadow an explicit registration)."""
        self._factories.setdefault(name, factory)

    def unregister(self, name: str) -> None:
        self._factories.pop(name, None)

    def names(self) -> list[str]:
        if self._load is not None:
            self._load()
        return sorted(self._factories)

    def factory(self, name: str) -> F:
        """The factory registered as `name`; `UnknownNameError` listing the known names otherwise."""
        names = self.names()
        if name not in self._factories:
            raise UnknownNameError(self.kind, name, names)
        return self._factories[name]
