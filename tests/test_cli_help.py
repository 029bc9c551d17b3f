"""The CLI's provider, retriever, tool-protocol and fault help is read from the registries (issue 21, item 4):
a provider registered in code appears with its label and default model, with nothing in the CLI naming it;
and `--fault` stays a documented alias of `--option faults=NAME`."""

from __future__ import annotations

import argparse
import re

import pytest

from workbench.cli import build_parser
from workbench.commands import _options
from workbench.errors import ProviderOptionError
from workbench.providers.base import _PROVIDERS, ModelStep, Provider, register_provider


class Chaos(Provider):
    label = "a test double"
    default_model = "gremlin-7b"
    supports_tools = False
    supports_json_schema = True
    default_tool_protocol = "json-steps"
    options_schema = {"type": "object", "additionalProperties": False,
                      "properties": {"faults": {"type": "array", "items": {"enum": ["bite", "scratch"]}}}}

    def complete(self, messages, tools):
        return ModelStep("")


@pytest.fixture
def chaos():
    register_provider("chaos", Chaos)
    yield
    _PROVIDERS.unregister("chaos")


def _help(command: str) -> str:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return re.sub(r"\s+", " ", sub.choices[command].format_help())


def test_help_lists_what_the_registries_hold(chaos):
    text = _help("ask")
    assert "chaos (a test double) [model: gremlin-7b]" in text
    assert "offline (no LLM)" in text and "[model: llama3.1, or $OLLAMA_MODEL]" in text
    assert "json-steps for chaos and llamacpp, native elsewhere" in text
    assert "only chaos, offline declares: bite, cite_unretrieved, corrupt_id, forget_link, link_listed, scratch" in text
    assert "bm25, hybrid" in text and "(default offline)" in text and "(default bm25)" in text
    assert "docs/design.md §9" in text  # --verify points at the method, not restating it


def test_a_command_that_runs_never_computes_the_help(monkeypatch):
    def boom():
        raise AssertionError("help computed")

    for name in ("provider_help", "retriever_help", "tool_protocol_help", "fault_help"):
        monkeypatch.setattr(_options, name, boom)
    args = build_parser().parse_args(["ask", "--no-trace", "--fault", "corrupt_id", "a question"])
    assert args.fault == ["corrupt_id"] and args.provider == "offline"


def test_fault_is_an_alias_of_the_faults_option():
    ns = argparse.Namespace(provider="offline", option=["faults=forget_link"], fault=["corrupt_id"])
    assert _options.provider_options(ns) == {"faults": ["forget_link", "corrupt_id"]}
    with pytest.raises(ProviderOptionError, match="provider 'ollama' has no option 'faults'"):
        _options.provider_options(argparse.Namespace(provider="ollama", option=[], fault=["corrupt_id"]))
