"""Functions at most 80 lines (the project's standard): every function and method of the library, the app and its
pages, nested ones included, measured from its `def` line to its last line (`end_lineno - lineno + 1`)."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT
from sources import parsed

MAX_LINES = 80


def sources() -> list[Path]:
    return sorted([*(ROOT / "workbench").rglob("*.py"), ROOT / "app.py", *(ROOT / "pages").glob("*.py")])


def long_functions(path: Path) -> list[str]:
    """`file:line name (n lines)` for every function of `path` longer than `MAX_LINES`."""
    tree = parsed(path)
    return [f"{path.name}:{n.lineno} {n.name} ({n.end_lineno - n.lineno + 1} lines)"
            for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and n.end_lineno - n.lineno + 1 > MAX_LINES]


def test_no_function_is_longer_than_80_lines():
    files = sources()
    assert ROOT / "app.py" in files and ROOT / "workbench" / "trace" / "spans.py" in files
    too_long = [f"{path.parent.relative_to(ROOT)}/{f}" for path in files for f in long_functions(path)]
    assert not too_long, "split these by job:\n" + "\n".join(too_long)


def test_the_measure_counts_from_def_to_last_line_methods_and_nested_ones_too(tmp_path):
    body = "\n".join(f"        x{i} = {i}" for i in range(79))  # with its `def`: 80 lines
    (tmp_path / "m.py").write_text(f"class C:\n    def fits(self):\n{body}\n\n    async def over(self):\n{body}\n"
                                   f"        def inner():\n            pass\n", encoding="utf-8")
    assert long_functions(tmp_path / "m.py") == ["m.py:83 over (82 lines)"]
