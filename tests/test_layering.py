"""Data flows one way (DESIGN.md §6): a module imports only from modules to its left."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

PKG = ROOT / "workbench"
#: Left to right. Shared modules (types, errors, config, text) may be imported anywhere.
LAYERS = ["corpus", "retrieval", "tools", "prompts", "providers", "agent", "provenance", "render",
          "faithfulness", "trace", "session", "batch", "analysis", "ui", "commands", "cli", "__main__"]
SHARED = {"types", "errors", "config", "text", "jsonl", "registry", "__init__"}
#: SDKs live in the one module that wraps them.
SDK_HOMES = {
    "llama_index": {"retrieval"},
    "ollama": {"providers/ollama", "retrieval/embeddings"},
    "google": {"providers/gemini", "retrieval/embeddings"},
    "streamlit": {"ui"},
    "duckdb": {"trace"},
    "opentelemetry": {"trace/openinference"},
}


def layer_of(path: Path) -> str:
    rel = path.relative_to(PKG).with_suffix("")
    return rel.parts[0]


def imports_of(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the package path
                base = path.relative_to(PKG).parent.parts[: len(path.relative_to(PKG).parent.parts) - (node.level - 1)]
                mod = ".".join([*base, node.module] if node.module else base)
                names = [mod] if node.module else [".".join([*base, a.name]) for a in node.names]
                for n in names:
                    yield "workbench." + n if n else "workbench"
            elif node.module:
                yield node.module
        elif isinstance(node, ast.Import):
            for a in node.names:
                yield a.name


def test_imports_flow_left_to_right():
    bad = []
    for f in PKG.rglob("*.py"):
        me = layer_of(f)
        if me in SHARED:
            continue
        for mod in imports_of(f):
            if not mod.startswith("workbench."):
                continue
            target = mod.split(".")[1]
            if target.startswith("__") and target != "__main__":
                target = "__init__"  # a package attribute such as __version__
            if target in SHARED or target == me:
                continue
            if target not in LAYERS or me not in LAYERS:
                bad.append(f"{f.relative_to(ROOT)} → {mod} (unknown layer; add it to LAYERS)")
            elif LAYERS.index(target) > LAYERS.index(me):
                bad.append(f"{f.relative_to(ROOT)} imports {mod}, which is to its right")
    assert not bad, "\n".join(bad)


def test_shared_modules_import_nothing_from_layers():
    for name in SHARED - {"__init__"}:
        f = PKG / f"{name}.py"
        for mod in imports_of(f):
            if mod.startswith("workbench."):
                assert mod.split(".")[1] in SHARED, f"{f.name} imports {mod}"


def test_sdks_are_imported_only_where_wrapped():
    bad = []
    for f in PKG.rglob("*.py"):
        rel = str(f.relative_to(PKG).with_suffix(""))
        for mod in imports_of(f):
            root = mod.split(".")[0]
            homes = SDK_HOMES.get(root)
            if homes and not any(rel == h or rel.startswith(h + "/") for h in homes):
                bad.append(f"{rel} imports {mod}")
    assert not bad, "\n".join(bad)
