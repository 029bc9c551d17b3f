"""The `openai` provider speaks the chat-completions wire format through the official `openai` client.

Loopback servers (tests/loopback.py) script the replies; the shared fault matrix in
test_provider_faults.py and the turn scenarios in test_provider_turns.py run against it too.
"""

from __future__ import annotations

import json
import time

import pytest

from loopback import OPENAI, Reply, ScriptedServer, openai_error, openai_reply
from workbench.providers import get_provider, provider_names
from workbench.providers.openai import DEFAULT_MODEL, OpenAIProvider

QUESTION = "How do I configure SSO?"
URL = "https://help.orbitly.example/articles/sso-saml-setup"


def ask(session, url, **extra):
    return session.ask(QUESTION, provider="openai", **OPENAI.options(url, **extra))


def test_registered_like_a_builtin_with_its_capabilities_declared(monkeypatch):
    monkeypatch.delenv("OPENAI_MODEL", raising=False)
    assert "openai" in provider_names()
    p = get_provider("openai")
    assert p.model == DEFAULT_MODEL and p.label == "OpenAI-compatible server"
    assert p.supports_tools and p.supports_json_schema and p.default_tool_protocol == "native"
    assert {"base_url", "api_key", "timeout", "max_tokens"} <= set(OpenAIProvider.options_schema["properties"])
    assert not OpenAIProvider.is_configured({}) and "OPENAI_BASE_URL" in OpenAIProvider.is_configured({}).hint
    assert OpenAIProvider.is_configured({"OPENAI_BASE_URL": "http://127.0.0.1:8080/v1"})


def test_tools_calls_and_results_go_out_in_openai_shape(demo_session):
    replies = [openai_reply(None, [("search", {"query": "SSO"}), ("list_categories", {})]),
               openai_reply(f"See [SAML setup]({URL}).")]
    with ScriptedServer(replies) as srv:
        result = ask(demo_session, srv.url)
    assert result.record.status == "ok", result.record.error
    first, second = srv.posts()
    assert first.path == "/v1/chat/completions" and first.body["model"] == "gpt-4o-mini"
    assert first.headers["authorization"] == "Bearer sk-test-not-a-real-key"
    declared = {t["function"]["name"]: t for t in first.body["tools"]}
    assert set(declared) == {s["name"] for s in demo_session.toolbox.specs()}
    assert all(t["type"] == "function" for t in first.body["tools"])
    assert declared["search"]["function"]["parameters"]["required"] == ["query"]
    assert "response_format" not in first.body and "max_tokens" not in first.body  # only when set
    assistant, search_result, categories = second.body["messages"][2:]
    assert assistant["role"] == "assistant" and [c["id"] for c in assistant["tool_calls"]] == ["call_0", "call_1"]
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"query": "SSO"}
    assert search_result["role"] == "tool" and search_result["tool_call_id"] == "call_0"
    assert json.loads(search_result["content"])["results"][0]["doc_id"]
    assert categories["tool_call_id"] == "call_1" and "categories" in json.loads(categories["content"])
    assert [t.call_id for t in result.record.tool_calls] == ["call_0", "call_1"]  # the server's ids
    last = result.record.model_calls[-1]
    assert (last.tokens_in, last.tokens_out, last.finish_reason, last.model_version) == (150, 35, "stop",
                                                                                        "gpt-4o-mini-2024-07-18")


def test_arguments_that_are_not_a_json_object_become_a_tool_error_the_model_sees(demo_session):
    replies = [openai_reply(None, [("search", '{"query": "SSO')]), openai_reply(None, [("search", '["SSO"]')]),
               openai_reply("Sorry, I could not search.")]
    with ScriptedServer(replies) as srv:
        result = ask(demo_session, srv.url)
    assert result.record.status == "ok" and result.record.answer == "Sorry, I could not search."
    broken, listed = result.record.tool_calls
    assert "must be a JSON object" in broken.error and '{"query": "SSO' in broken.error and not broken.results
    assert "must be a JSON object" in listed.error
    told = [m for m in srv.posts()[1].body["messages"] if m["role"] == "tool"]
    assert told[0]["tool_call_id"] == "call_0" and "must be a JSON object" in told[0]["content"]


def test_retry_after_is_honoured(demo_session):
    replies = [openai_error(429, "Rate limit reached", retry_after="1"), openai_reply("Done.")]
    with ScriptedServer(replies) as srv:
        start = time.perf_counter()
        result = ask(demo_session, srv.url, retries=2, backoff=0.001)
        waited = time.perf_counter() - start
    assert result.record.status == "ok" and result.record.model_calls[0].retries == 1
    assert waited >= 1.0  # the server's 1 s, not the 1 ms backoff
    assert len(srv.posts()) == 2


def test_a_retry_after_longer_than_the_cap_fails_at_once(demo_session):
    with ScriptedServer([openai_error(429, "Rate limit reached", retry_after="3600")], repeat_last=True) as srv:
        result = ask(demo_session, srv.url, retries=3)
    assert result.record.status == "rate_limited" and "429" in result.record.error
    assert len(srv.posts()) == 1


def test_unknown_model_names_the_model_and_lists_what_the_server_has(demo_session):
    err = openai_error(404, "The model `gpt-9` does not exist or you do not have access to it.", code="model_not_found")
    with ScriptedServer([err], models=["gpt-4o-mini", "SmolLM2-135M-Instruct.Q4_1.gguf"]) as srv:
        result = ask(demo_session, srv.url, model="gpt-9")
    record = result.record
    assert record.status == "unknown_model"
    assert "'gpt-9'" in record.error and "pick another model" in record.error and "SmolLM2-135M-Instruct.Q4_1.gguf" in record.error


def test_list_models_reads_the_server_and_is_empty_when_down():
    from loopback import refused_url

    with ScriptedServer(models=["b-model", "a-model"]) as srv:
        p = get_provider("openai", base_url=srv.url + "/v1", api_key="sk-test")
        assert p.list_models() == ["a-model", "b-model"]
        assert srv.requests[0].path == "/v1/models"
    assert get_provider("openai", base_url=refused_url() + "/v1").list_models() == []


def test_context_overflow_from_a_llama_cpp_server(demo_session):
    body = {"error": {"code": 400, "message": "request (9000 tokens) exceeds the available context size (8192 tokens), "
                                              "try increasing it", "type": "exceed_context_size_error",
                      "n_prompt_tokens": 9000, "n_ctx": 8192}}
    with ScriptedServer([Reply(400, body)]) as srv:
        result = ask(demo_session, srv.url)
    assert result.record.status == "context_overflow" and "lower k" in result.record.error
    assert len(srv.posts()) == 1  # a 400 is not retried


def test_a_server_without_json_schema_output_names_the_native_protocol(demo_session):
    err = openai_error(400, "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model")
    with ScriptedServer([err]) as srv:
        result = demo_session.ask(QUESTION, provider="openai", tool_protocol="json-steps", **OPENAI.options(srv.url))
    assert result.record.status == "json_schema_unsupported" and "`native` tool protocol" in result.record.error


def test_no_server_and_no_key_names_both_variables_before_any_request(monkeypatch, demo_session):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = demo_session.ask(QUESTION, provider="openai")
    assert result.record.status == "auth_error"
    assert "OPENAI_BASE_URL" in result.record.error and "OPENAI_API_KEY" in result.record.error


def test_a_local_server_without_a_key_and_the_generation_settings(monkeypatch, demo_session):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("WORKBENCH_PROVIDER_MAX_TOKENS", "256")
    with ScriptedServer([openai_reply("Nothing needed.")]) as srv:
        result = demo_session.ask(QUESTION, provider="openai", base_url=srv.url + "/v1", temperature=0, seed=7)
    assert result.record.status == "ok"
    [sent] = srv.posts()
    assert sent.headers["authorization"] == "Bearer no-key"  # the client insists on one; it is not a credential
    assert (sent.body["max_tokens"], sent.body["temperature"], sent.body["seed"]) == (256, 0, 7)


@pytest.mark.parametrize("value", ["1.5", "Wed, 21 Oct 2015 07:28:00 GMT"])
def test_retry_after_parsing(value):
    from workbench.retries import retry_after as _retry_after

    class Exc:
        class response:
            headers = {"retry-after": value}

    assert _retry_after(Exc()) == (1.5 if value == "1.5" else 0.0)  # a date in the past: no wait
