"""Named factories of one kind — providers, retrievers, judges: the one way to extend the workbench.

Each kind has one `Registry`, built from three things:
- a **built-ins module** that registers the shipped factories through `register`, the same hook an
  outside plug-in uses (imported on first use, so nothing loads before it is needed);
- the modules named in **`$WORKBENCH_PLUGINS`** (comma-separated), imported once per process before
  any registry answers, so one plug-in module may register a provider, a retriever and a judge;
- an **entry-point group** (`workbench.providers`, `workbench.retrievers`, `workbench.judges`) for
  installed packages, which then need no variable at all.

A name registered twice keeps the last registration, so a plug-in may replace a built-in; entry
points never shadow an explicit registration. The registered name is the one identity of what a
factory builds: `build` stamps it on the object's `name`, so a provider registered as `echo` is
recorded as `echo` whatever its class says (as simonw/llm keys a model on its `model_id`). Any plug-in that fails to load is a `PluginError`
naming it (the CLI prints it and exits 2). docs/plugins.md has a working example of each kind.

Thread-safe: loading happens once, under one process-wide re-entrant lock, and a registry counts as
loaded only once its built-ins module has finished registering (a concurrent batch's workers may be
the first to ask for a judge: none of them may see a half-filled registry).
"""

from __future__ import annotations

import importlib
import sys
import threading
from importlib.metadata import entry_points
from typing import Callable, Generic, TypeVar

from .config import env
from .errors import PluginError, UnknownNameError

F = TypeVar("F", bound=Callable)

#: Comma-separated module names imported (once) before any registry lists or builds anything.
PLUGINS_ENV = "WORKBENCH_PLUGINS"
_imported_plugins: set[str] = set()
#: Held while any registry loads (re-entrant: a built-ins or plug-in module calls `register` as it imports).
_LOADING = threading.RLock()


def load_plugins() -> None:
    """Import every module named in `$WORKBENCH_PLUGINS` not imported yet; each registers what it brings."""
    with _LOADING:
        for module in (m.strip() for m in env(PLUGINS_ENV, "").split(",")):
            if not module or module in _imported_plugins:
                continue
            try:
                importlib.import_module(module)
            except Exception as exc:
                raise PluginError(f"cannot import plugin {module!r} named in {PLUGINS_ENV}: "
                                  f"{type(exc).__name__}: {exc} (is its folder on PYTHONPATH?)") from None
            _imported_plugins.add(module)


class Registry(Generic[F]):
    """The factories of one `kind`, by name (see the module docstring for where they come from)."""

    def __init__(self, kind: str, builtins_module: str | None = None, entry_point_group: str | None = None):
        self.kind = kind
        self.builtins_module = builtins_module
        self.entry_point_group = entry_point_group
        self._factories: dict[str, F] = {}
        self._builtins_loaded = builtins_module is None
        self._builtins_loading = False
        self._entry_points_loaded = entry_point_group is None

    def _load_builtins(self) -> None:
        # Before any other registration, so a plug-in registering a built-in's name replaces it.
        if self._builtins_loaded:
            return
        with _LOADING:
            if self._builtins_loaded or self._builtins_loading:  # loading: the built-ins module registering
                return
            self._builtins_loading = True
            try:
                importlib.import_module(self.builtins_module)
            finally:
                self._builtins_loading = False
            self._builtins_loaded = True  # only now may another thread read the factories

    def _load(self) -> None:
        self._load_builtins()
        load_plugins()
        if self._entry_points_loaded:
            return
        with _LOADING:
            if self._entry_points_loaded:
                return

            for ep in entry_points(group=self.entry_point_group):
                try:
                    self._factories.setdefault(ep.name, ep.load())
                except Exception as exc:
                    raise PluginError(f"cannot load {self.kind} entry point {ep.name!r} ({ep.value}) of group "
                                      f"{self.entry_point_group}: {type(exc).__name__}: {exc}") from None
            self._entry_points_loaded = True

    def register(self, name: str, factory: F | None = None):
        """Register `factory` under `name`; without a factory, a decorator."""
        if self.builtins_module not in sys.modules:  # else the built-ins are loaded, or registering right now
            self._load_builtins()

        def _register(f: F) -> F:
            self._factories[name] = f
            return f

        return _register(factory) if factory is not None else _register

    def unregister(self, name: str) -> None:
        self._factories.pop(name, None)

    def names(self) -> list[str]:
        """Every registered name, sorted (built-ins, plug-ins and entry points)."""
        self._load()
        return sorted(self._factories)

    def factory(self, name: str) -> F:
        """The factory registered as `name`; `UnknownNameError` listing the known names otherwise."""
        names = self.names()
        if name not in self._factories:
            raise UnknownNameError(self.kind, name, names)
        return self._factories[name]

    def build(self, name: str, *args, **kwargs):
        """What the factory registered as `name` builds, carrying `name` as its `name`: the registered
        name is the one traced, verified and shown, whatever (if anything) the class itself declares."""
        obj = self.factory(name)(*args, **kwargs)
        try:
            obj.name = name
        except AttributeError:
            raise PluginError(f"{self.kind} {name!r}: its factory built a {type(obj).__name__}, whose `name` "
                              "cannot be set (the registered name must be recorded on it)") from None
        return obj
