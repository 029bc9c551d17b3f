"""The fault matrix, for every network provider, over loopback servers and the official clients.

Every fault ends the turn with a status and a message that names the fix, recorded in the turn;
nothing raises out of `Session.ask` or crashes the CLI; API keys never appear anywhere.
"""

from __future__ import annotations

import json
import logging

import pytest

from loopback import GEMINI, OLLAMA, WIRES, Reply, ScriptedServer, refused_url
from workbench.agent import MAX_STEPS
from workbench.retries import Failed, with_retries

QUESTION = "How do I configure SSO?"
URL = "https://help.orbitly.example/articles/sso-saml-setup"
both = pytest.mark.parametrize("wire", list(WIRES.values()), ids=list(WIRES))


def ask(session, wire, url, **extra):
    return session.ask(QUESTION, provider=wire.provider, **wire.options(url, **extra))


def assert_failed(result, status: str, *words: str):
    record = result.record
    assert record.status == status, (record.status, record.error)
    assert result.payload.status == status and result.payload.error == record.error
    for w in words:
        assert w in record.error, (w, record.error)
    assert record.answer == ""
    return record


@both
def test_connection_refused(wire, demo_session):
    record = assert_failed(ask(demo_session, wire, refused_url()), "connection_error", "cannot connect")
    assert wire.url_env in record.error, record.error  # names the setting that says where the server is
    assert record.model_calls[-1].finish_reason == "error"


@both
def test_timeout(wire, demo_session):
    with ScriptedServer([Reply(200, {}, delay=1.5)]) as srv:
        assert_failed(ask(demo_session, wire, srv.url, timeout=0.3), "timeout", "0.3 s",
                      "WORKBENCH_PROVIDER_TIMEOUT")
    assert len(srv.posts()) == 1  # a timeout is not retried: it would only multiply the wait


@both
@pytest.mark.parametrize("code", [401, 403])
def test_auth_errors_name_the_key_variable(wire, code, demo_session):
    with ScriptedServer([wire.error(code, "unauthorized")]) as srv:
        assert_failed(ask(demo_session, wire, srv.url), "auth_error", wire.key_env, str(code))
    assert len(srv.posts()) == 1


def test_gemini_invalid_key_400_is_an_auth_error(demo_session):
    with ScriptedServer([GEMINI.error(400, "API key not valid. Please pass a valid API key.")]) as srv:
        assert_failed(ask(demo_session, GEMINI, srv.url), "auth_error", "GEMINI_API_KEY")


def test_gemini_missing_key_names_the_variable(monkeypatch, demo_session):
    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    with ScriptedServer([GEMINI.reply("never")]) as srv:
        opts = {k: v for k, v in GEMINI.options(srv.url).items() if k != "api_key"}
        result = demo_session.ask(QUESTION, provider="gemini", **opts)
    assert_failed(result, "auth_error", "GEMINI_API_KEY", "aistudio.google.com/apikey")
    assert srv.posts() == []


def test_ollama_unknown_model_names_the_model_and_how_to_pull_or_pick(demo_session):
    with ScriptedServer([OLLAMA.error(404, 'model "llama9" not found, try pulling it first')]) as srv:
        result = demo_session.ask(QUESTION, provider="ollama", **OLLAMA.options(srv.url, model="llama9"))
    assert_failed(result, "unknown_model", "'llama9'", "ollama pull llama9", "llama3.1:latest", "qwen2.5:7b")


def test_gemini_unknown_model_names_the_model_and_how_to_pick(demo_session):
    with ScriptedServer([GEMINI.error(404, "models/gemini-9 is not found for API version v1beta")]) as srv:
        result = demo_session.ask(QUESTION, provider="gemini", **GEMINI.options(srv.url, model="gemini-9"))
    assert_failed(result, "unknown_model", "'gemini-9'", "pick an available model", "gemini-2.5-flash")


@both
@pytest.mark.parametrize("code,status", [(429, "rate_limited"), (500, "server_error"), (503, "server_error")])
def test_429_and_5xx_retry_with_backoff_then_fail(wire, code, status, demo_session):
    with ScriptedServer([wire.error(code, "busy")], repeat_last=True) as srv:
        record = assert_failed(ask(demo_session, wire, srv.url, retries=2), status, str(code), "after 3 attempts")
    assert len(srv.posts()) == 3  # the first attempt and two retries, then the error
    assert record.model_calls[-1].retries == 2


@both
def test_a_transient_error_then_success_is_recorded_as_a_retry(wire, demo_session):
    with ScriptedServer([wire.error(429, "slow down"), wire.error(503, "overloaded"),
                         wire.reply("Nothing needed.")]) as srv:
        result = ask(demo_session, wire, srv.url, retries=3)
    assert result.record.status == "ok" and result.record.answer == "Nothing needed."
    assert [c.retries for c in result.record.model_calls] == [2]


def test_backoff_is_exponential_and_bounded():
    waits, attempts = [], []

    def flaky():
        attempts.append(1)
        raise OSError("busy")

    with pytest.raises(Failed) as info:
        with_retries(flaky, retries=3, backoff=0.5, transient=lambda e: True, sleep=waits.append)
    assert waits == [0.5, 1.0, 2.0] and len(attempts) == 4 and info.value.retries == 3
    with pytest.raises(Failed):  # not transient: no retry at all
        with_retries(flaky, retries=3, backoff=0.5, transient=lambda e: False, sleep=waits.append)
    assert len(attempts) == 5


# --- malformed tool calls, unknown tools, endless tool loops -------------------------------------

@both
def test_wrong_arguments_become_a_tool_error_the_model_sees(wire, demo_session):
    replies = [wire.reply("", [("search", {"q": "SSO"})]), wire.reply("", [("search", {"query": "SSO"})]),
               wire.reply(f"See [SAML setup]({URL}).")]
    with ScriptedServer(replies) as srv:
        result = ask(demo_session, wire, srv.url)
    assert result.record.status == "ok"
    bad, good = result.record.tool_calls
    assert bad.error and "unexpected argument" in bad.error and not bad.results
    assert good.error is None and good.results
    assert "unexpected argument" in json.dumps(srv.posts()[1].body)  # the model was told
    assert result.payload.tool_calls[0].error == bad.error


def test_ollama_non_object_arguments_end_the_turn_with_bad_tool_args(demo_session):
    body = {"model": "llama3.1", "done": True, "message": {"role": "assistant", "content": "",
            "tool_calls": [{"function": {"name": "search", "arguments": "{\"query\": \"SSO"}}]}}
    with ScriptedServer([Reply(200, body)]) as srv:
        assert_failed(ask(demo_session, OLLAMA, srv.url), "bad_tool_args", "not a JSON object", "query")


def test_ollama_tool_call_parse_error_is_not_retried(demo_session):
    err = "error parsing tool call: raw='{\"query\": \"SSO', err=unexpected end of JSON input"
    with ScriptedServer([OLLAMA.error(500, err)], repeat_last=True) as srv:
        assert_failed(ask(demo_session, OLLAMA, srv.url), "bad_tool_args", "could not parse")
    assert len(srv.posts()) == 1


def test_gemini_malformed_function_call_ends_the_turn(demo_session):
    reply = GEMINI.reply(None, finish="MALFORMED_FUNCTION_CALL", finish_message="Malformed function call: search{")
    with ScriptedServer([reply]) as srv:
        record = assert_failed(ask(demo_session, GEMINI, srv.url), "bad_tool_args", "MALFORMED_FUNCTION_CALL")
    assert record.model_calls[-1].finish_reason == "MALFORMED_FUNCTION_CALL"
    assert record.model_calls[-1].tokens_in == 200  # the failed call's usage is still recorded


def test_ollama_model_without_tool_support_says_what_to_do(demo_session):
    with ScriptedServer([OLLAMA.error(400, "registry.ollama.ai/library/gemma2:latest does not support tools")]) as srv:
        result = demo_session.ask(QUESTION, provider="ollama", **OLLAMA.options(srv.url, model="gemma2"))
    assert_failed(result, "tools_unsupported", "'gemma2'", "mode `excerpts`")


def test_gemini_safety_stop_without_text_is_blocked(demo_session):
    with ScriptedServer([GEMINI.reply(None, finish="SAFETY")]) as srv:
        record = assert_failed(ask(demo_session, GEMINI, srv.url), "blocked", "SAFETY")
    assert record.model_calls[-1].finish_reason == "SAFETY"


@both
def test_unknown_tool_is_a_tool_error_and_the_turn_goes_on(wire, demo_session):
    replies = [wire.reply("", [("delete_workspace", {"id": "all"})]), wire.reply("I cannot do that.")]
    with ScriptedServer(replies) as srv:
        result = ask(demo_session, wire, srv.url)
    assert result.record.status == "ok" and result.record.answer == "I cannot do that."
    [call] = result.record.tool_calls
    assert call.name == "delete_workspace" and "unknown tool" in call.error
    assert "unknown tool" in json.dumps(srv.posts()[1].body)


@both
def test_endless_tool_loop_stops_at_the_step_limit(wire, demo_session):
    with ScriptedServer([wire.reply("", [("search", {"query": "SSO"})])], repeat_last=True) as srv:
        record = assert_failed(ask(demo_session, wire, srv.url), "step_limit", f"after {MAX_STEPS} steps")
    assert len(srv.posts()) == MAX_STEPS == len(record.model_calls) == len(record.tool_calls)


# --- secrets -------------------------------------------------------------------------------------

SECRET = "AIzaSyD-LEAK-CANARY-0123456789abcdef"


@both
@pytest.mark.parametrize("code", [400, 401, 500])
def test_api_keys_never_reach_errors_payloads_or_logs(wire, code, demo_session, monkeypatch, caplog):
    monkeypatch.setenv(wire.key_env, SECRET)
    echo = wire.error(code, f"API key not valid: {SECRET} (see https://x.example/?key={SECRET})")
    caplog.set_level(logging.DEBUG)
    with ScriptedServer([echo], repeat_last=True) as srv:
        opts = {k: v for k, v in wire.options(srv.url, retries=1).items() if k != "api_key"}
        result = demo_session.ask(QUESTION, provider=wire.provider, **opts)
    sent = srv.posts()[0].headers
    assert SECRET in (sent.get("x-goog-api-key", "") + sent.get("authorization", ""))  # it was really used
    assert result.record.status != "ok" and result.record.error
    assert SECRET not in result.record.error and "[redacted]" in result.record.error
    assert SECRET not in json.dumps(result.payload.to_json()) and SECRET not in json.dumps(result.record.to_dict(), default=str)
    assert SECRET not in caplog.text


@both
def test_cli_fault_is_a_clean_failed_turn_without_the_key(wire, monkeypatch, capsys):
    from workbench.cli import main

    with ScriptedServer([wire.error(401, f"bad key {SECRET}")], repeat_last=True) as srv:
        for name, value in {**wire.env(srv.url), wire.key_env: SECRET}.items():
            monkeypatch.setenv(name, value)
        code = main(["ask", "--provider", wire.provider, QUESTION])
    out, err = capsys.readouterr()
    assert code == 1, err  # a failed turn, not a crash (exit 2) or a traceback
    assert "Traceback" not in err
    assert "turn failed (auth_error)" in err and wire.key_env in err
    assert SECRET not in out + err


# --- untrusted model output: any tool name and any arguments object ------------------------------

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                     max_leaves=8)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(["search", "fetch_document", "browse_section", "list_articles", "rm_rf"]) | st.text(max_size=12),
       args=st.dictionaries(st.text(max_size=10), _json, max_size=4))
def test_any_tool_call_from_the_model_is_recorded_never_raised(name, args, demo_session):
    with ScriptedServer([OLLAMA.reply("", [(name, args)]), OLLAMA.reply("Done.")]) as srv:
        result = ask(demo_session, OLLAMA, srv.url)
    assert result.record.status == "ok", result.record.error
    [call] = result.record.tool_calls
    assert call.name == name
    [answered] = [m for m in srv.posts()[1].body["messages"] if m["role"] == "tool"]
    assert answered.get("tool_name", "") == name  # whatever happened, the model was told (the client drops "")
    if call.error is not None:
        assert json.loads(answered["content"]) == {"error": call.error}


def test_a_provider_error_carries_its_failed_call_into_the_record(demo_session):
    """`ProviderError.call` is a declared field: any provider may set it, and the turn records it."""
    from workbench.errors import ProviderError
    from workbench.providers import Provider, register_provider
    from workbench.types import ModelCall

    class Refusing(Provider):
        name = label = "refusing-test"

        def complete(self, messages, tools):
            raise ProviderError("quota exhausted", status="rate_limited",
                                call=ModelCall(self.name, "m", 12.5, finish_reason="error", retries=2))

    register_provider("refusing-test", Refusing)
    assert ProviderError("x").call is None
    record = demo_session.ask(QUESTION, provider="refusing-test", judge=None).record
    assert record.status == "rate_limited" and record.error == "quota exhausted"
    assert record.model_calls == (ModelCall("refusing-test", "m", 12.5, finish_reason="error", retries=2),)
