"""A provider written by a user registers exactly like the built-ins, without editing the package."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.errors import PluginError
from workbench.providers import base, provider_names

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The example from docs/providers.md, read from the docs so the docs cannot drift from what works.
DOCS = Path(ROOT) / "docs" / "providers.md"
PLUGIN = re.search(r"```python\n(# my_provider\.py\n.*?)```", DOCS.read_text(encoding="utf-8"), re.S).group(1)


@pytest.fixture
def plugin_dir(tmp_path):
    (tmp_path / "my_provider.py").write_text(PLUGIN)
    yield tmp_path
    base._PROVIDERS.unregister("openfirst")
    base._loaded_plugins.discard("my_provider")
    sys.modules.pop("my_provider", None)


def test_workbench_plugins_registers_a_user_provider(plugin_dir, monkeypatch, demo_session):
    monkeypatch.syspath_prepend(str(plugin_dir))
    assert "openfirst" not in provider_names()
    monkeypatch.setenv("WORKBENCH_PLUGINS", "my_provider")
    assert {"openfirst", "offline", "ollama", "gemini"} <= set(provider_names())
    result = demo_session.ask("How do I configure SSO?", provider="openfirst")
    assert result.record.status == "ok"
    assert [t.name for t in result.record.tool_calls] == ["search", "fetch_document"]
    opened = result.record.tool_calls[1].results[0].doc_id
    assert result.payload["sets"]["consulted"] == [opened] == result.payload["sets"]["cited"]
    assert result.payload["config"]["provider_label"] == "open-first-hit (example)"


def test_a_plugin_that_does_not_import_is_a_clear_error(monkeypatch, capsys):
    from workbench.cli import main

    monkeypatch.setenv("WORKBENCH_PLUGINS", "no_such_provider_module")
    with pytest.raises(PluginError, match="no_such_provider_module.*WORKBENCH_PLUGINS"):
        provider_names()
    assert main(["ask", "--provider", "offline", "x"]) == 2  # the CLI prints the error, no traceback
    assert capsys.readouterr().err.startswith("error: cannot import provider plugin 'no_such_provider_module'")


def _run(args, env, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "workbench", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60)


def test_cli_uses_a_plugin_named_in_the_environment(plugin_dir):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, str(plugin_dir)]), "WORKBENCH_PLUGINS": "my_provider"}
    proc = _run(["ask", "--provider", "openfirst", "How do I configure SSO?", "--json"], env)
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["status"] == "ok" and len(payload["sets"]["consulted"]) == 1


def test_an_installed_entry_point_registers_without_any_environment(tmp_path, monkeypatch, demo_session):
    """A package that declares `[project.entry-points."workbench.providers"]` needs no configuration at all."""
    source = PLUGIN.replace('register_provider("openfirst", OpenFirstHit)', "")
    assert source != PLUGIN
    (tmp_path / "ep_provider.py").write_text(source)
    dist = tmp_path / "ep_provider-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-provider\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[workbench.providers]\nepprov = ep_provider:OpenFirstHit\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("WORKBENCH_PLUGINS", raising=False)
    monkeypatch.setattr(base, "_entry_points_loaded", False)
    try:
        assert "epprov" in provider_names()
        result = demo_session.ask("How do I configure SSO?", provider="epprov")
        assert result.record.status == "ok" and len(result.payload["sets"]["consulted"]) == 1
    finally:
        base._PROVIDERS.unregister("epprov")
        sys.modules.pop("ep_provider", None)
