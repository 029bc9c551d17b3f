"""One name, one meaning (issue 42 item 2, ../shared/STYLE.md): no two modules of `workbench/` define a public class
of the same name, nor two whose names differ only in case or underscores (`Rerun` beside `ReRun`), so a name read
anywhere in the code or the docs means one thing. No allow-list: a second meaning gets a second name.
"""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT
from sources import parsed


def _public_classes(root: Path):
    """(class name, module path) of every public class a module of `root/workbench` defines, nested ones included."""
    for f in sorted((root / "workbench").rglob("*.py")):
        rel = f.relative_to(root).as_posix()
        for node in ast.walk(parsed(f)):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                yield node.name, rel


def collisions(root: Path = ROOT) -> dict[str, list[str]]:
    """Each name (folded: lower case, no underscores) two modules define a public class of → `name in module`."""
    by_key: dict[str, list[str]] = {}
    for name, rel in _public_classes(root):
        by_key.setdefault(name.lower().replace("_", ""), []).append(f"{name} in {rel}")
    return {k: v for k, v in by_key.items() if len({w.split(" in ")[1] for w in v}) > 1}


def test_no_two_modules_define_a_public_class_of_one_name():
    found = collisions()
    assert not found, "one name, two classes (rename one):\n" + "\n".join(", ".join(v) for v in found.values())


def test_the_check_finds_a_shared_name_and_one_that_differs_only_in_case(tmp_path):
    (tmp_path / "workbench" / "audit").mkdir(parents=True)
    (tmp_path / "workbench" / "types.py").write_text("class Document: ...\nclass ReRun: ...\nclass _Docs: ...\n")
    (tmp_path / "workbench" / "audit" / "units.py").write_text(
        "class Document: ...\nclass Outer:\n    class Rerun: ...\nclass _Docs: ...\nclass Unit: ...\n")
    assert sorted(collisions(tmp_path).values()) == [
        ["Document in workbench/audit/units.py", "Document in workbench/types.py"],
        ["Rerun in workbench/audit/units.py", "ReRun in workbench/types.py"]]
