"""The `ollama` provider speaks Ollama's /api/chat wire format through the official client."""

from __future__ import annotations

import json
import os

import pytest

from loopback import OLLAMA, ScriptedServer, ollama_reply
from workbench.providers import get_provider, provider_names
from workbench.providers.ollama import DEFAULT_MODEL, to_ollama_messages

URL = "https://help.orbitly.example/articles/sso-saml-setup"


def test_registered_like_a_builtin_with_a_documented_default_model():
    assert "ollama" in provider_names()
    p = get_provider("ollama")
    assert p.model == DEFAULT_MODEL == "llama3.1" and p.label == "ollama"


def test_tools_and_tool_messages_go_out_in_ollama_shape(demo_session):
    replies = [ollama_reply("", [("search", {"query": "SSO"}), ("list_categories", {})]),
               ollama_reply(f"See [SAML setup]({URL}).")]
    with ScriptedServer(replies) as srv:
        result = demo_session.ask("How do I configure SSO?", provider="ollama", **OLLAMA.options(srv.url))
    assert result.record.status == "ok", result.record.error
    first, second = (r.body for r in srv.posts())
    assert srv.posts()[0].path == "/api/chat" and first["stream"] is False and first["model"] == "llama3.1"
    declared = {t["function"]["name"]: t for t in first["tools"]}
    assert set(declared) == {s["name"] for s in demo_session.toolbox.specs()}
    assert all(t["type"] == "function" for t in first["tools"])
    assert declared["search"]["function"]["parameters"]["required"] == ["query"]
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    # the model's two parallel calls are replayed, then answered by two tool messages in order
    assistant, search_result, categories = second["messages"][2:]
    assert [c["function"] for c in assistant["tool_calls"]] == [
        {"name": "search", "arguments": {"query": "SSO"}}, {"name": "list_categories", "arguments": {}}]
    assert search_result["role"] == "tool" and search_result["tool_name"] == "search"
    assert json.loads(search_result["content"])["results"][0]["doc_id"]
    assert categories["tool_name"] == "list_categories" and "categories" in json.loads(categories["content"])
    # ids are ours (Ollama has none) and unique within the turn
    ids = [t.call_id for t in result.record.tool_calls]
    assert ids == ["ollama-1", "ollama-2"]


def test_message_translation():
    neutral = [
        {"role": "system", "content": "S"}, {"role": "user", "content": "Q"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "search", "args": {"query": "x"}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "search", "content": "{\"results\": []}"},
        {"role": "assistant", "content": "A"},
    ]
    assert to_ollama_messages(neutral) == [
        {"role": "system", "content": "S"}, {"role": "user", "content": "Q"},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "search", "arguments": {"query": "x"}}}]},
        {"role": "tool", "content": "{\"results\": []}", "tool_name": "search"},
        {"role": "assistant", "content": "A"},
    ]


def test_ollama_host_is_honoured_and_models_are_listed(monkeypatch):
    with ScriptedServer(models=["llama3.1:latest", "qwen2.5:7b"]) as srv:
        monkeypatch.setenv("OLLAMA_HOST", srv.url)
        p = get_provider("ollama")
        assert p.list_models() == ["llama3.1:latest", "qwen2.5:7b"]
        assert [r.path for r in srv.requests] == ["/api/tags"]


def test_list_models_is_empty_when_ollama_is_down():
    from loopback import refused_url

    assert get_provider("ollama", host=refused_url()).list_models() == []


@pytest.mark.skipif(not (os.environ.get("WORKBENCH_LIVE") == "1" and os.environ.get("OLLAMA_HOST")),
                    reason="live Ollama test: set WORKBENCH_LIVE=1 and OLLAMA_HOST (and OLLAMA_MODEL) to run it")
def test_live_ollama_turn(demo_session):
    result = demo_session.ask("How do I configure SSO?", provider="ollama", model=os.environ.get("OLLAMA_MODEL"))
    assert result.record.status == "ok", result.record.error
    assert result.record.model_calls and result.record.model_calls[0].tokens_in
    assert result.payload.sets.retrieved
