"""Providers declare capabilities on the class, and the core reads them — never a provider's name.

`supports_tools` / `supports_json_schema` decide whether agent mode can run, `options_schema` is how
options are checked, parsed on the command line, drawn in the app's sidebar and recorded, and
`is_configured(env)` decides what the notebooks offer and what the app warns about.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
from typing import Iterator

import pytest
from streamlit.proto.TextInput_pb2 import TextInput as TextInputProto
from streamlit.testing.v1 import AppTest

from apptest import APP
from conftest import ROOT
from clirun import cli
from workbench.errors import ProviderOptionError, WorkbenchError
from workbench.providers import Provider, Readiness, declared, get_provider, readiness, register_provider
from workbench.providers.base import ModelStep
from workbench.providers.gemini import GeminiProvider
from workbench.providers.llamacpp import LlamaCppProvider, default_gguf
from workbench.providers.offline import FAULTS, OfflineProvider
from workbench.providers.ollama import OllamaProvider
from workbench.providers.openai import OpenAIProvider
from workbench.providers.options import check_options, input_kind, parse_option
from workbench.redact import recorded
from workbench.types import ModelCall


class ExcerptsOnly(Provider):
    """No tool calling and no schema output: agent mode is impossible; options of every input kind."""

    name = "excerpts-only-test"
    label = "excerpts only (test)"
    supports_tools = False
    supports_json_schema = False
    options_schema = {"type": "object", "additionalProperties": False, "properties": {
        "tone": {"enum": ["plain", "formal"], "default": "plain", "title": "Tone"},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": True, "title": "Tags"},
        "loud": {"type": "boolean", "title": "Loud"},
        "repeat": {"type": "integer", "minimum": 1, "title": "Repeat"},
        "ratio": {"type": "number", "title": "Ratio"},
        "prefix": {"type": "string", "title": "Prefix"},
        "token": {"type": "string", "writeOnly": True, "title": "Token"},
    }}

    @classmethod
    def is_configured(cls, env):
        return Readiness(bool(env.get("EXCERPTS_ONLY_TOKEN")), "set EXCERPTS_ONLY_TOKEN to anything")

    def complete(self, messages, tools):
        assert not tools
        return ModelStep("See [1].", (), ModelCall(self.name, "v1"))


register_provider("excerpts-only-test", ExcerptsOnly)


# --- what the built-ins declare is true --------------------------------------------------------


@pytest.mark.parametrize("cls", [OfflineProvider, OllamaProvider, GeminiProvider, OpenAIProvider, LlamaCppProvider])
def test_options_schema_lists_exactly_the_keyword_options_init_takes(cls):
    params = {n for n, p in inspect.signature(cls.__init__).parameters.items()
              if n not in ("self", "model") and p.kind is p.POSITIONAL_OR_KEYWORD}
    assert set(cls.options_schema["properties"]) == params
    assert cls.options_schema["additionalProperties"] is False
    assert all(input_kind(p) for p in cls.options_schema["properties"].values()), "the app can draw each one"


def test_builtin_capabilities():
    assert OfflineProvider.options_schema["properties"]["faults"]["items"]["enum"] == list(FAULTS)
    assert all(c.supports_tools for c in (OfflineProvider, OllamaProvider, GeminiProvider))
    assert GeminiProvider.options_schema["properties"]["api_key"]["writeOnly"] is True


@pytest.mark.parametrize("name,env,variable", [("ollama", {"OLLAMA_HOST": "http://h:1"}, "OLLAMA_HOST"),
                                               ("gemini", {"GEMINI_API_KEY": "k"}, "GEMINI_API_KEY"),
                                               ("gemini", {"GOOGLE_API_KEY": "k"}, "GEMINI_API_KEY")])
def test_is_configured_names_the_variable_to_set(name, env, variable):
    missing = readiness(name, {})
    assert not missing and variable in missing.hint
    assert readiness(name, env).ok
    assert readiness("offline", {}).ok


def test_the_notebooks_offer_only_configured_providers():
    from workbench import analysis as A

    assert "excerpts-only-test" not in A.configured_providers({})
    assert "excerpts-only-test" in A.configured_providers({"EXCERPTS_ONLY_TOKEN": "x"})
    assert "openai" in A.configured_providers({"OPENAI_BASE_URL": "http://127.0.0.1:1/v1"})
    # the in-process model is ready whenever it is installed, yet too slow for a batch over everything
    assert bool(readiness("llamacpp", {})) == (default_gguf() is not None)
    assert not declared("llamacpp", "batch_by_default")
    assert "llamacpp" not in A.configured_providers({"WORKBENCH_GGUF": "/any/model.gguf"})


# --- options: checked, parsed, recorded ---------------------------------------------------------


@pytest.mark.parametrize("name,options,message", [
    ("offline", {"faults": ["nope"]}, "'nope' is not one of: corrupt_id"),
    ("offline", {"faults": ["corrupt_id", "corrupt_id"]}, "lists an item twice"),
    ("offline", {"faults": "corrupt_id"}, "is not an array"),
    ("ollama", {"faults": ["corrupt_id"]}, "provider 'ollama' has no option 'faults' (its options: backoff, budget, context_tokens, host"),
    ("ollama", {"timeout": 0}, "0 is outside the allowed range (more than 0, at most 600)"),
    ("ollama", {"retries": 1.5}, "is not an integer"),
    ("gemini", {"retries": True}, "is not an integer"),
    ("openai", {"faults": ["corrupt_id"]}, "provider 'openai' has no option 'faults' (its options: api_key, backoff, base_url, budget"),
    ("llamacpp", {"host": "x"}, "provider 'llamacpp' has no option 'host' (its options: cache_prompt, max_tokens, n_ctx"),
    ("llamacpp", {"n_ctx": 16}, "16 is outside the allowed range (256 to 32768)"),
])
def test_get_provider_checks_options_against_the_schema(name, options, message):
    with pytest.raises(ProviderOptionError, match=re.escape(message)):
        get_provider(name, **options)


def test_options_given_as_none_mean_the_default():
    assert get_provider("ollama", host=None, timeout=None).timeout == 120.0
    assert get_provider("offline", faults=None).faults == frozenset()  # it raised TypeError from set(None)


def test_parse_option_converts_by_the_schema_type():
    schema = ExcerptsOnly.options_schema
    assert parse_option("x", schema, "tags=a, b") == ("tags", ["a", "b"])
    assert parse_option("x", schema, "loud=yes") == ("loud", True)
    assert parse_option("x", schema, "repeat=3") == ("repeat", 3)
    assert parse_option("x", schema, "ratio=0.5") == ("ratio", 0.5)
    assert parse_option("x", schema, "prefix=a=b") == ("prefix", "a=b")
    for bad, message in (("repeat=x", "'x' is not an integer"), ("loud=maybe", "'maybe' is not a boolean"),
                         ("nope=1", "has no option 'nope'"), ("tags", "is NAME=VALUE")):
        with pytest.raises(ProviderOptionError, match=message):
            parse_option("x", schema, bad)
    check_options("x", schema, {"repeat": 2, "tone": "formal"})
    assert recorded(schema, {"token": "s3cret", "tags": ("a",), "ratio": None}) == {"tags": ["a"]}


def test_options_are_recorded_with_the_turn_but_never_a_secret(tmp_path):
    from workbench.session import Session
    from workbench.trace import TraceReader

    db = tmp_path / "t.duckdb"
    s = Session.open(trace_db=db)
    faulty = s.ask("How do I configure SSO?", faults=["corrupt_id"])
    assert faulty.payload.config.options == {"faults": ["corrupt_id"]} and faulty.payload.rejected_citations
    secret = s.ask("How do I configure SSO?", provider="excerpts-only-test", mode="excerpts", token="s3cret-token",
                   repeat=2)
    assert secret.payload.config.options == {"repeat": 2}
    configs = [c for (c,) in TraceReader(db).rows("SELECT config_json FROM runs")[1]]
    assert any('"faults": ["corrupt_id"]' in c for c in configs)
    assert "s3cret-token" not in json.dumps(secret.payload.to_json()) + "".join(configs)


def test_cli_option_and_fault_go_through_the_provider_schema(capsys):
    from workbench.cli import main

    ok = cli("ask", "--no-trace", "--json", "-o", "faults=corrupt_id", "--fault", "forget_link",
          "How do I configure SSO?")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["config"]["options"] == {"faults": ["corrupt_id", "forget_link"]}
    for args, message in ((["--provider", "ollama", "--fault", "corrupt_id"], "provider 'ollama' has no option 'faults'"),
                          (["--provider", "ollama", "-o", "timeout=soon"], "option 'timeout': 'soon' is not a number"),
                          (["--provider", "llamacpp", "-o", "max_tokens=lots"], "'lots' is not an integer"),
                          (["--fault", "nope"], "'nope' is not one of")):
        assert main(["ask", "--no-trace", *args, "How do I configure SSO?"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err, err


# --- supports_tools / supports_json_schema ------------------------------------------------------


def test_agent_mode_needs_tools_or_json_schema(demo_session):
    assert not declared("excerpts-only-test", "supports_tools")
    with pytest.raises(WorkbenchError, match="cannot run agent mode: use excerpt mode"):
        demo_session.ask("How do I configure SSO?", provider="excerpts-only-test", judge=None)
    answer = demo_session.ask("How do I configure SSO?", provider="excerpts-only-test", mode="excerpts", judge=None)
    assert answer.record.status == "ok" and answer.payload.sets.consulted


# --- the app reads the same declarations -------------------------------------------------------


@pytest.fixture
def app(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_DB", str(tmp_path / "traces.duckdb"))
    monkeypatch.delenv("EXCERPTS_ONLY_TOKEN", raising=False)
    return AppTest.from_file(APP, default_timeout=60).run()


def test_sidebar_draws_each_option_from_the_schema_and_warns_when_unconfigured(app):
    app.sidebar.selectbox(key="cfg_provider").set_value("excerpts-only-test").run()
    assert not app.exception, app.exception
    sb = app.sidebar
    key = "cfg_opt_excerpts-only-test_{}".format
    assert sb.selectbox(key=key("tone")).options == ["plain", "formal"]
    assert sb.multiselect(key=key("tags")).options == ["a", "b", "c"]
    assert sb.checkbox(key=key("loud")).value is False
    assert sb.number_input(key=key("repeat")).value is None
    assert sb.number_input(key=key("ratio")).value is None
    assert sb.text_input(key=key("prefix")).value == ""
    assert sb.text_input(key=key("token")).proto.type == TextInputProto.PASSWORD
    assert sb.radio(key="cfg_mode").options == ["excerpts"], "no tools, no schema: excerpt mode only"
    assert any("EXCERPTS_ONLY_TOKEN" in w.value for w in sb.warning), [w.value for w in sb.warning]

    sb.selectbox(key=key("tone")).set_value("formal")
    sb.multiselect(key=key("tags")).set_value(["b"])
    sb.checkbox(key=key("loud")).check()
    sb.number_input(key=key("repeat")).set_value(3)
    sb.text_input(key=key("token")).input("s3cret-token")
    app.run()
    app.chat_input[0].set_value("How do I configure SSO?").run()
    assert not app.exception, app.exception
    turn = app.session_state["turns"][-1]
    assert dict(turn.config.options) == {"tone": "formal", "tags": ("b",), "loud": True, "repeat": 3,
                                         "token": "s3cret-token"}
    assert turn.payload.config.options == {"loud": True, "repeat": 3, "tags": ["b"], "tone": "formal"}
    shown = "\n".join(c.value for c in app.caption)
    assert "formal" in shown and "s3cret" not in shown


#: The only comparisons with a provider's name the code may make, each with why: (file, the comparison as
#: `ast.unparse` writes it). None now: the app's default provider is `config.DEFAULT_PROVIDER`, not a name.
NAME_COMPARISONS_ALLOWED: set[tuple[str, str]] = set()


def _string_constants(node: ast.AST) -> Iterator[str]:
    """The string constants `node` is or lists (a tuple, list or set of them, as `x in ("a", "b")` has)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        for element in node.elts:
            yield from _string_constants(element)


def name_comparisons(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, code) of every comparison in `source` against one of `names`: `==`, `!=`, `in`, `not in`, `is` on
    either side, whatever the other side is called (`name == "offline"`, `"gemini" in kinds`), and `case "…":`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
        elif isinstance(node, ast.MatchValue):
            sides = [node.value]
        else:
            continue
        if names & {c for side in sides for c in _string_constants(side)}:
            found.append((node.lineno, ast.unparse(node)))
    return found


def test_no_code_branches_on_a_provider_s_name():
    """The core, the providers, the app and its pages read declarations; they never ask `name == "offline"` or
    `provider in ("ollama", "gemini")`, whatever the variable is called."""
    from workbench.providers import provider_names

    names = set(provider_names())
    assert {"offline", "ollama", "gemini", "openai", "llamacpp"} <= names
    files = [*(ROOT / "workbench").rglob("*.py"), ROOT / "app.py", *(ROOT / "pages").glob("*.py")]
    found = {(p.relative_to(ROOT).as_posix(), code): line for p in files
             for line, code in name_comparisons(p.read_text(encoding="utf-8"), names)}
    bad = [f"{where}:{line}: {code}" for (where, code), line in found.items()
           if (where, code) not in NAME_COMPARISONS_ALLOWED]
    assert not bad, bad
    assert NAME_COMPARISONS_ALLOWED <= set(found), "an allowed comparison that is gone leaves the list"
    for probe in ('if name == "offline":\n    pass', 'if p.provider in ("ollama", "gemini"):\n    pass',
                  'ok = kind not in ["llamacpp"]', '"gemini" == cfg.provider', 'x = "openai" != other',
                  'match which:\n    case "offline":\n        pass'):
        assert name_comparisons(probe, names), probe  # the walk itself catches each form
    assert not name_comparisons('if mode == "agent":\n    pass', names)
    assert not [p.name for p in (ROOT / "workbench" / "ui").glob("*.py") if "FAULTS" in p.read_text(encoding="utf-8")]


def test_the_modes_and_tool_protocols_are_stated_once():
    """`types.MODES` and `steps.TOOL_PROTOCOLS` are the only lists; the contract schema, the CLI and the
    pickers derive theirs, and no other module writes the list out again."""
    import argparse

    from workbench import schemas
    from workbench.commands._options import add_run_options
    from workbench.providers.steps import TOOL_PROTOCOLS
    from workbench.types import MODES

    assert list(MODES) == schemas.load("turn-record.schema.json")["properties"]["mode"]["enum"]
    p = argparse.ArgumentParser()
    add_run_options(p)
    choices = {a.dest: a.choices for a in p._actions}
    assert tuple(choices["mode"]) == MODES and tuple(choices["tool_protocol"]) == TOOL_PROTOCOLS
    written = re.compile(r"""(?<!Literal)[(\[]\s*["']agent["']\s*,\s*["']excerpts["']\s*[)\]]|"""
                         r"""[(\[]\s*["']native["']\s*,\s*["']json-steps["']\s*[)\]]""")
    files = [*(ROOT / "workbench").rglob("*.py"), ROOT / "app.py", *(ROOT / "pages").glob("*.py")]
    again = [f"{f.relative_to(ROOT)}:{i}" for f in files
             for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1) if written.search(line)]
    assert not again, again
