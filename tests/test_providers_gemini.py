"""The `gemini` provider speaks Gemini's generateContent wire format through google-genai."""

from __future__ import annotations

import os

import pytest

from loopback import GEMINI, ScriptedServer, gemini_reply
from workbench.providers import get_provider, provider_names
from workbench.providers.gemini import DEFAULT_MODEL

URL = "https://help.orbitly.example/articles/sso-saml-setup"


def test_registered_like_a_builtin_with_a_documented_default_model():
    assert "gemini" in provider_names()
    p = get_provider("gemini", api_key="k-123456")
    assert p.model == DEFAULT_MODEL == "gemini-2.5-flash"
    assert "k-123456" not in repr(p) and "k-123456" not in repr(vars(p).get("options"))


def test_function_declarations_calls_and_responses_on_the_wire(demo_session):
    replies = [gemini_reply("Let me look.", [("search", {"query": "SSO"}), ("list_categories", {})],
                            signature="dGhvdWdodC1zaWduYXR1cmU="),
               gemini_reply(f"See [SAML setup]({URL}).", tokens_in=900, tokens_out=12)]
    with ScriptedServer(replies) as srv:
        result = demo_session.ask("How do I configure SSO?", provider="gemini", **GEMINI.options(srv.url))
    assert result.record.status == "ok", result.record.error
    first, second = srv.posts()
    assert first.path == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert first.headers["x-goog-api-key"] == "AIzaTEST-not-a-real-key"  # the key goes only in the header
    body = first.body
    assert "You answer questions" in body["systemInstruction"]["parts"][0]["text"]
    assert [c["role"] for c in body["contents"]] == ["user"]
    [tool] = body["tools"]
    declared = {d["name"]: d for d in tool["functionDeclarations"]}
    assert set(declared) == {s["name"] for s in demo_session.toolbox.specs()}
    schema = declared["search"].get("parametersJsonSchema") or declared["search"].get("parameters_json_schema")
    assert schema["required"] == ["query"]
    # one request per model step: no automatic function calling inside the SDK
    assert len(srv.posts()) == len(result.record.model_calls) == 2
    # the model's turn is replayed verbatim (thought signature kept), then both calls are answered in one turn
    model_turn, answers = second.body["contents"][1:]
    assert model_turn["role"] == "model"
    assert model_turn["parts"][0] == {"text": "Let me look."}
    assert model_turn["parts"][1]["functionCall"] == {"name": "search", "args": {"query": "SSO"}}
    assert model_turn["parts"][1]["thoughtSignature"] == "dGhvdWdodC1zaWduYXR1cmU="
    assert answers["role"] == "user"
    names = [p["functionResponse"]["name"] for p in answers["parts"]]
    assert names == ["search", "list_categories"]
    assert answers["parts"][0]["functionResponse"]["response"]["results"][0]["doc_id"]
    assert "categories" in answers["parts"][1]["functionResponse"]["response"]
    last = result.record.model_calls[-1]
    assert (last.tokens_in, last.tokens_out, last.finish_reason, last.model_version) == (900, 12, "STOP",
                                                                                        "gemini-2.5-flash-001")


def test_translation_without_a_replayable_turn_rebuilds_function_calls():
    p = get_provider("gemini", api_key="k-123456")
    system, contents = p.to_contents([
        {"role": "system", "content": "S"}, {"role": "user", "content": "Q"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "search", "args": {"query": "x"}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "search", "content": "[1, 2]"},
    ])
    assert system == "S"
    assert [c.role for c in contents] == ["user", "model", "user"]
    assert contents[1].parts[0].function_call.name == "search"
    assert contents[1].parts[0].function_call.id is None  # the id was ours, not the server's
    assert contents[2].parts[0].function_response.response == {"output": [1, 2]}  # responses must be objects


def test_server_given_call_ids_are_sent_back(demo_session):
    reply = gemini_reply(None, [("list_categories", {})])
    reply.body["candidates"][0]["content"]["parts"][0]["functionCall"]["id"] = "srv-7"
    with ScriptedServer([reply, gemini_reply("The knowledge base has these categories.")]) as srv:
        result = demo_session.ask("What categories are there?", provider="gemini", **GEMINI.options(srv.url))
    assert result.record.tool_calls[0].call_id == "srv-7"
    answer = srv.posts()[1].body["contents"][-1]["parts"][0]["functionResponse"]
    assert answer["id"] == "srv-7"


def test_list_models_keeps_models_that_generate_content():
    from loopback import Reply

    body = {"models": [{"name": "models/gemini-2.5-flash", "supportedGenerationMethods": ["generateContent"]},
                       {"name": "models/text-embedding-004", "supportedGenerationMethods": ["embedContent"]}]}
    with ScriptedServer([Reply(body=body)]) as srv:
        p = get_provider("gemini", api_key="AIzaTEST-not-a-real-key", base_url=srv.url)
        assert p.list_models() == ["gemini-2.5-flash"]
    assert srv.requests[0].method == "GET" and srv.requests[0].path.startswith("/v1beta/models")


@pytest.mark.skipif(not (os.environ.get("WORKBENCH_LIVE") == "1" and
                         (os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY"))),
                    reason="live Gemini test: set WORKBENCH_LIVE=1 and GEMINI_API_KEY to run it")
def test_live_gemini_turn(demo_session):
    result = demo_session.ask("How do I configure SSO?", provider="gemini", model=os.environ.get("GEMINI_MODEL"))
    assert result.record.status == "ok", result.record.error
    assert result.record.model_calls[0].model_version
    assert result.payload.sets.retrieved
