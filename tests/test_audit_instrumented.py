"""Audited turns of real instrumented apps (docs/design.md §12): llama-index with a postprocessor, the bare openai
client in a tool loop over two turns of one session, and a run with OPENINFERENCE_HIDE_INPUTS=true; spans reach
a running `collect` through the OTel SDK's own OTLP/HTTP exporter. Expected sets come from what each app did
(tests/audit_apps.py; tests/test_phoenix.py checks the same turns read from a Phoenix project)."""

from __future__ import annotations

import pytest

from audit_apps import (SEARCH, SESSION_QUESTIONS, check_llama_turn, check_session_turns, collect, llama_replies,
                        run_llama_app, run_openai_app, session_replies, tracer_provider, turns, write_corpus)
from loopback import ScriptedServer, openai_reply

pytest.importorskip("openinference.instrumentation.llama_index")
pytest.importorskip("openinference.instrumentation.openai")


def test_llama_index_query_engine_with_a_postprocessor(tmp_path):
    db = tmp_path / "t.duckdb"
    with ScriptedServer(replies=llama_replies()) as llm, \
            collect(db, "llama", "--corpus", str(write_corpus(tmp_path / "kb.jsonl"))) as url:
        run = run_llama_app(tracer_provider(url, "kb-assistant"), llm)
    [turn] = turns(db, "--run", "llama")
    check_llama_turn(turn, run, service="kb-assistant")


def test_openai_client_tool_loop_over_two_turns_of_a_session(tmp_path):
    db = tmp_path / "t.duckdb"
    with ScriptedServer(replies=session_replies()) as llm, collect(db, "bot") as url:
        messages = run_openai_app(tracer_provider(url, "support-bot"), llm.url, SESSION_QUESTIONS)
    first, second = turns(db, "--conversation", "chat-42")
    check_session_turns(first, second, messages, llm)
    assert first["audit"]["service"] == "support-bot"


def test_hidden_inputs_make_the_turn_unauditable(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENINFERENCE_HIDE_INPUTS", "true")
    db = tmp_path / "t.duckdb"
    replies = [openai_reply(None, [("search", {"q": "sso"})], model="loop-gpt"),
               openai_reply(f"See [{SEARCH[0]['title']}]({SEARCH[0]['url']}).", model="loop-gpt")]
    with ScriptedServer(replies=replies) as llm, collect(db, "hidden") as url:
        run_openai_app(tracer_provider(url, "support-bot"), llm.url, ["How do I set up SSO?"])
    [turn] = turns(db, "--run", "hidden")
    assert turn["status"] == "unauditable"
    assert "__REDACTED__" in turn["audit"]["reason"]
    assert turn["sets"]["consulted"] == [] and turn["sources"] == []
