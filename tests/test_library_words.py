"""Library messages name no command-line flag (issue 21, item 4): the app shows the same errors, where
`--model` means nothing. A message says what to set in neutral words ("pick another model", "the
`native` tool protocol"); a whole command a user may run is quoted in backticks and may keep its flags."""

from __future__ import annotations

import ast
import re

from conftest import ROOT
from sources import parsed

FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]+")
#: The shell (its flags are its own), SQL text (`--` starts a comment) and the generated trace docs.
SHELL = ("commands/", "cli.py", "__main__.py")
NOT_MESSAGES = ("trace/schema", "trace/docs.py")


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def flags_in_messages(root=ROOT / "workbench") -> list[str]:
    bad = []
    for f in sorted(root.rglob("*.py")):
        rel = str(f.relative_to(root))
        if rel.startswith(SHELL) or rel.startswith(NOT_MESSAGES):
            continue
        tree = parsed(f)
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):  # an f-string is read whole, its values as {}
                skip |= {id(v) for v in node.values}
                text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
                text = node.value
            else:
                continue
            for flag in FLAG.findall(re.sub(r"`[^`]*`", "", text)):  # a quoted command keeps its flags
                bad.append(f"{rel}:{node.lineno}: {flag}")
    return bad


def test_library_messages_name_no_cli_flag():
    assert not flags_in_messages(), "\n".join(flags_in_messages())


def test_the_check_finds_a_flag(tmp_path):
    (tmp_path / "m.py").write_text('def f():\n    raise ValueError(f"pick one with --model {1}")\n'
                                   'OK = "run `workbench ask --db X` first"\n', encoding="utf-8")
    assert flags_in_messages(tmp_path) == ["m.py:2: --model"]
