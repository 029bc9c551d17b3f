"""`context_tokens`: an option of `openai` and `ollama`, checked like every numeric option, recorded with the run; without
it the server is asked (llama.cpp's `GET /props`, Ollama's `POST /api/show`) and where the figure came from is
recorded. Through the official clients against loopback servers. Before the fix the openai provider assumed 4,096
tokens for any server but the OpenAI API, and neither provider took the option."""

from __future__ import annotations

import re

import pytest

from loopback import OLLAMA, OPENAI, ScriptedServer, ollama_show
from workbench.errors import ProviderOptionError
from workbench.providers import get_provider

QUESTION = "How do I configure SSO?"


@pytest.mark.parametrize("provider", ["openai", "ollama"])
@pytest.mark.parametrize("value,why", [(100, "outside the allowed range (256 to 10000000)"), ("8k", "is not an integer"),
                                       (True, "is not an integer"), (10**9, "outside the allowed range")])
def test_context_tokens_is_checked_like_every_numeric_option(provider, value, why):
    with pytest.raises(ProviderOptionError, match=re.escape(why)):
        get_provider(provider, context_tokens=value)


def test_the_environment_variable_is_checked_too(monkeypatch):
    from workbench.errors import ProviderError

    monkeypatch.setenv("WORKBENCH_PROVIDER_CONTEXT_TOKENS", "12")
    with pytest.raises(ProviderError, match="WORKBENCH_PROVIDER_CONTEXT_TOKENS='12'.*256 to 10000000"):
        get_provider("openai")


def test_a_llama_cpp_server_is_asked_its_context(demo_session):
    server = ScriptedServer([OPENAI.reply("Nothing on that.")], props={"default_generation_settings": {"n_ctx": 2048}})
    with server as srv:
        answer = demo_session.ask(QUESTION, provider="openai", **OPENAI.options(srv.url))
    assert answer.record.status == "ok", answer.record.error
    assert answer.record.config["context_window"] == {"tokens": 2048, "source": "the server's /props (llama.cpp n_ctx)",
                                                      "output_tokens": 512}
    assert [r.path for r in srv.requests if r.method == "GET"] == ["/props"]


def test_the_option_wins_and_is_recorded_with_the_run(demo_session):
    server = ScriptedServer([OPENAI.reply("Nothing on that.")], props={"default_generation_settings": {"n_ctx": 2048}})
    with server as srv:
        answer = demo_session.ask(QUESTION, provider="openai", **OPENAI.options(srv.url, context_tokens=32768))
    cfg = answer.record.config
    assert cfg["context_window"]["tokens"] == 32768 and cfg["context_window"]["source"] == "the context_tokens option"
    assert cfg["options"]["context_tokens"] == 32768
    assert not [r for r in srv.requests if r.method == "GET"], "nothing asked: the option says"


def test_a_server_that_reports_nothing_is_assumed_and_says_so(demo_session):
    with ScriptedServer([OPENAI.reply("Nothing on that.")]) as srv:
        answer = demo_session.ask(QUESTION, provider="openai", **OPENAI.options(srv.url))
    window = answer.record.config["context_window"]
    assert window["tokens"] == 4096 and window["source"].startswith("assumed") and "context_tokens" in window["source"]


def test_ollama_is_asked_the_models_num_ctx(demo_session):
    server = ScriptedServer([OLLAMA.reply("Nothing on that.")], show=ollama_show("num_ctx 8192\nstop \"x\""))
    with server as srv:
        answer = demo_session.ask(QUESTION, provider="ollama", **OLLAMA.options(srv.url))
    window = answer.record.config["context_window"]
    assert window["tokens"] == 8192 and window["source"] == "the server's /api/show (the model's num_ctx)"
    assert [r.body["model"] for r in srv.requests if r.path == "/api/show"] == ["llama3.1"]
    assert "options" not in srv.posts()[0].body


def test_ollama_without_num_ctx_is_its_default_and_the_option_is_sent_as_num_ctx(demo_session):
    with ScriptedServer([OLLAMA.reply("Nothing on that.")]) as srv:
        plain = demo_session.ask(QUESTION, provider="ollama", **OLLAMA.options(srv.url))
    assert plain.record.config["context_window"]["tokens"] == 4096
    assert "trained for 131,072" in plain.record.config["context_window"]["source"]
    with ScriptedServer([OLLAMA.reply("Nothing on that.")]) as srv:
        answer = demo_session.ask(QUESTION, provider="ollama", **OLLAMA.options(srv.url, context_tokens=16384))
    assert answer.record.config["context_window"]["tokens"] == 16384
    assert srv.posts()[0].body["options"]["num_ctx"] == 16384, "Ollama is told the context it is counted with"
    assert not [r for r in srv.requests if r.path == "/api/show"]
