"""The environment is read at the edge, in `workbench/config.py` only (issue 21, item 5): every other module
asks `config.env(NAME)` or `config.environment()`, so what configures the workbench is found in one place."""

from __future__ import annotations

import ast

from conftest import ROOT
from sources import parsed

_ENV_NAMES = {"environ", "environb", "getenv", "putenv", "unsetenv"}


def environment_reads(files) -> list[str]:
    """`os.environ` / `os.getenv` / … uses (as an attribute or a from-import) in `files`, as `name:line`."""
    bad = []
    for f in files:
        for node in ast.walk(parsed(f)):
            if (isinstance(node, ast.Attribute) and node.attr in _ENV_NAMES and getattr(node.value, "id", None) == "os"
                    or isinstance(node, ast.ImportFrom) and node.module == "os"
                    and _ENV_NAMES & {a.name for a in node.names}):
                bad.append(f"{f.name}:{node.lineno}")
    return bad


def test_only_config_reads_the_environment():
    files = [f for f in [*(ROOT / "workbench").rglob("*.py"), ROOT / "app.py", *(ROOT / "pages").glob("*.py")]
             if f != ROOT / "workbench" / "config.py"]
    assert not environment_reads(files), environment_reads(files)


def test_the_check_sees_each_form(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import os\nfrom os import environ\nA = os.environ.get('X')\nB = os.getenv('Y')\n", encoding="utf-8")
    assert sorted(environment_reads([f])) == ["m.py:2", "m.py:3", "m.py:4"]


def test_env_strips_and_defaults(monkeypatch):
    from workbench.config import env

    monkeypatch.setenv("WB_TEST_VALUE", "  x  ")
    monkeypatch.setenv("WB_TEST_BLANK", "   ")
    assert env("WB_TEST_VALUE") == "x" and env("WB_TEST_BLANK") is None and env("WB_TEST_BLANK", "d") == "d"
