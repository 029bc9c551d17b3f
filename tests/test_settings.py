"""The environment is read once, at the edge, into `config.Settings`, and passed down (issue 32 item 8)."""

from __future__ import annotations

import dataclasses

import pytest

from workbench.config import Settings
from workbench.errors import WorkbenchError


def test_settings_are_a_snapshot_of_the_environment_typed(monkeypatch, tmp_path):
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path))
    monkeypatch.delenv("WORKBENCH_DB", raising=False)
    monkeypatch.setenv("WORKBENCH_LOCK_TIMEOUT", " 7 ")
    monkeypatch.setenv("WORKBENCH_ANALYSTS", "a@x.example, ,b@x.example")
    settings = Settings.from_env()
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "later"))  # read once: a later change is not seen
    monkeypatch.setenv("OLLAMA_HOST", "http://later:1")
    assert settings.home == tmp_path and settings.trace_db == tmp_path / "traces.duckdb"
    assert settings.lock_timeout == 7.0 and settings.query_timeout == 20.0
    assert settings.analysts == {"a@x.example", "b@x.example"}
    assert settings.get("OLLAMA_HOST") != "http://later:1"
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.home = tmp_path  # frozen


def test_a_bad_duration_names_its_variable():
    with pytest.raises(WorkbenchError, match="WORKBENCH_QUERY_TIMEOUT='soon' is not a number of seconds"):
        Settings.from_env({"WORKBENCH_QUERY_TIMEOUT": "soon"})


def test_a_provider_reads_the_settings_it_is_given_not_the_environment(monkeypatch):
    from workbench.providers import get_provider

    monkeypatch.setenv("OLLAMA_HOST", "http://from-the-environment:1")
    given = Settings.from_env({"OLLAMA_HOST": "http://from-the-edge:2", "OLLAMA_MODEL": "edge-model"})
    ollama = get_provider("ollama", settings=given)
    assert (ollama.host, ollama.model) == ("http://from-the-edge:2", "edge-model")
    assert get_provider("offline", settings=given).name == "offline"  # a provider that takes no settings


def test_the_cli_reads_the_environment_once_and_passes_it_down(monkeypatch, capsys):
    """`ask` opens a session and builds a provider: one read of the environment, in `cli.main`."""
    from workbench.cli import main

    reads = []
    real = Settings.from_env.__func__

    def counted(cls, environ=None):
        reads.append(environ)
        return real(cls, environ)

    monkeypatch.setattr(Settings, "from_env", classmethod(counted))
    assert main(["ask", "--no-trace", "How do I configure SSO?"]) == 0
    assert len(reads) == 1, f"the environment was read {len(reads)} times"
