"""Data flows one way (docs/design.md §6): a module imports only from modules to its left."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT
from sources import parsed

PKG = ROOT / "workbench"
#: Left to right. Shared modules (types, errors, config, text) may be imported anywhere.
LAYERS = ["questions", "corpus", "retrieval", "tools", "prompts", "providers", "context_policy", "agent", "payload", "provenance", "render",
          "faithfulness", "verify", "answer", "trace", "session", "batch", "audit", "replay", "analysis", "ui", "commands", "cli", "__main__"]
SHARED = {"types", "errors", "config", "text", "jsonl", "registry", "safe_yaml", "paths", "terminal", "schemas", "redact", "retries",
          "turn_ids",
          "__init__"}
#: SDKs live in the one module that wraps them.
SDK_HOMES = {
    "llama_index": {"retrieval"},
    "ollama": {"providers/ollama", "retrieval/embeddings"},
    "openai": {"providers/openai"},
    "xllamacpp": {"providers/llamacpp"},
    "streamlit": {"ui"},
    "duckdb": {"trace"},
    "opentelemetry": {"trace/openinference", "audit/spans"},
    "google": {"providers/gemini", "retrieval/embeddings", "audit/spans"},
    "phoenix": {"audit/phoenix"},
}


def layer_of(path: Path) -> str:
    rel = path.relative_to(PKG).with_suffix("")
    return rel.parts[0]


def imports_of(path: Path):
    tree = parsed(path)
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
        f = PKG / f"{name}.py" if (PKG / f"{name}.py").exists() else PKG / name / "__init__.py"
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


def test_the_audit_never_imports_the_agent():
    """An audited turn is what another app did, read from its spans: the audit runs nothing of ours."""
    bad = [f"{f.relative_to(ROOT)} imports {mod}" for f in (PKG / "audit").rglob("*.py") for mod in imports_of(f)
           if mod.split(".")[:2] in (["workbench", n] for n in ("agent", "providers", "tools", "retrieval", "session",
                                                                   "batch", "verify", "context_policy"))]
    assert not bad, "\n".join(bad)


def test_commands_do_not_import_each_other():
    """Each command is a thin shell over the library; helpers they share live in `commands/_*.py`."""
    bad = []
    for f in (PKG / "commands").glob("*.py"):
        for mod in imports_of(f):
            parts = mod.split(".")
            if parts[:2] == ["workbench", "commands"] and len(parts) > 2 and not parts[2].startswith("_"):
                bad.append(f"{f.name} imports {mod}")
    assert not bad, "\n".join(bad)


def test_requirements_list_what_the_code_imports():
    """Every runtime requirement is imported somewhere (nothing listed for nothing, e.g. `rich`)."""
    import re

    text = (ROOT / "requirements.txt").read_text(encoding="utf-8")
    runtime = text.split("# Tests and notebooks in CI")[0]
    names = [re.split(r"[<>=\[]", line)[0].strip() for line in runtime.splitlines()
             if line.strip() and not line.startswith("#")]
    # distribution name → the module it provides, where they differ
    module = {"llama-index-core": "llama_index", "llama-index-retrievers-bm25": "llama_index.retrievers.bm25",
              "google-genai": "google.genai", "pyyaml": "yaml", "pypdf": "pypdf", "PyStemmer": "Stemmer",
              "markdown-it-py": "markdown_it",
              "opentelemetry-sdk": "opentelemetry.sdk",
              "opentelemetry-exporter-otlp-proto-http": "opentelemetry.exporter.otlp.proto.http",
              "opentelemetry-proto": "opentelemetry.proto",
              "arize-phoenix-client": "phoenix.client",
              "jupyterlab": None,
              "pytz": None,  # DuckDB 1.5 imports it to fetch a TIMESTAMPTZ
              # DuckDB extension wheels: loaded by path (workbench/trace/lake.py), never imported
              "duckdb-extension-ducklake": None, "duckdb-extension-postgres": None, "duckdb-extension-httpfs": None,
              "authlib": None}  # Streamlit's `st.login` imports it (workbench/ui/identity.py)
    code = "\n".join(p.read_text(encoding="utf-8") for p in [*ROOT.glob("workbench/**/*.py"), ROOT / "app.py"])
    unused = []
    for name in names:
        mod = module.get(name, name.replace("-", "_"))
        if mod and not re.search(rf"^\s*(import|from) {re.escape(mod)}\b", code, re.M):
            unused.append(name)
    assert not unused, f"listed in requirements.txt but never imported: {unused}"
