"""No import circle among workbench modules (docs/design.md §6), counting imports inside functions and under
TYPE_CHECKING: a module that needs another's name at any time sits to its right, never in a loop with it."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT
from sources import parsed

PKG = ROOT / "workbench"


def module_of(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


MODULES = {module_of(f): f for f in PKG.rglob("*.py")}


def imported(path: Path, me: str | None = None) -> set[str]:
    """The workbench modules `path` (module `me`) imports anywhere in its text (module level, functions,
    TYPE_CHECKING): for `from m import n`, the submodule m.n when there is one, else m."""
    me = me or module_of(path)
    package = me.split(".") if path.name == "__init__.py" else me.split(".")[:-1]
    out = set()
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                mod = ".".join([*base, *(node.module.split(".") if node.module else [])])
            else:
                mod = node.module or ""
            for a in node.names:
                out.add(f"{mod}.{a.name}" if f"{mod}.{a.name}" in MODULES else mod)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m in MODULES and m != me}


def circles() -> list[list[str]]:
    """Each strongly connected group of more than one module (Tarjan), sorted."""
    graph = {m: sorted(imported(f)) for m, f in MODULES.items()}
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_the_finder_sees_a_function_level_import(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .payload import Payload\n"
                 "def g():\n    from . import types\n", encoding="utf-8")
    assert imported(f, "workbench.m") == {"workbench.types", "workbench.payload"}


def test_no_import_circle():
    found = circles()
    assert not found, "import circles:\n" + "\n".join(" ↔ ".join(g) for g in found)
