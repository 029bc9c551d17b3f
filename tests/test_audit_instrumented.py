"""Audited turns of real instrumented apps (docs/design.md §12): llama-index with a postprocessor, the bare openai
client in a tool loop over two turns of one session, and a run with OPENINFERENCE_HIDE_INPUTS=true; spans reach
a running `collect` through the OTel SDK's own OTLP/HTTP exporter. Expected sets come from what each app did
(tests/audit_apps.py; tests/test_phoenix.py checks the same turns read from a Phoenix project)."""

from __future__ import annotations

import json

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
    first, second = turns(db, "--conversation", "otel/support-bot/chat-42")  # the service's session (§12)
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
    assert turn["sets"] == {"retrieved": [], "cited": [], "consulted": []} and turn["sources"] == []
    assert turn["rejected_citations"] == []  # its allow-list is unknown: no link is called fabricated
    assert turn["audit"]["unjudged_citations"] == [SEARCH[0]["url"]]


def _questions(path, lines: list[dict]):
    path.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in lines), encoding="utf-8")
    return path


def _runs(db, *args: str) -> dict:
    from clirun import cli

    out = cli("runs", *args, "--db", str(db), "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[0])


def test_collect_scores_the_audited_run_against_a_questions_file_and_gates_on_a_baseline(tmp_path):
    """`collect --questions`: the chat's turns matched to a conversation's lines by session and position, a
    question asked on its own by its text (NFC: the file writes it decomposed), a line no turn answered and a
    turn no line asked reported; then a worse run of the same app fails the gate against the first."""
    import unicodedata

    okta, setup, reset = SEARCH[1], SEARCH[0], SEARCH[2]
    cafe = "Can I reset my password from the café?"
    db = tmp_path / "t.duckdb"
    replies = [openai_reply(None, [("search", {"q": "sso"})], model="loop-gpt"),
               openai_reply(f"Use the Okta app: see [{okta['title']}]({okta['url']}).", model="loop-gpt"),
               openai_reply(f"Without Okta, follow [{setup['title']}]({setup['url']}).", model="loop-gpt"),
               openai_reply(None, [("search", {"q": "password"})], model="loop-gpt"),
               openai_reply(f"Yes: [{reset['title']}]({reset['url']}).", model="loop-gpt"),
               openai_reply("I do not know.", model="loop-gpt")]
    # the expectations are what the app did: the document each answer linked, among those its tool returned
    qfile = _questions(tmp_path / "support.jsonl", [
        {"question": "How do I set up SSO with Okta?", "conversation": "chat-42", "expected": [okta["doc_id"]]},
        {"question": "And without Okta?", "conversation": "chat-42", "expected": [setup["doc_id"]]},
        {"question": unicodedata.normalize("NFD", cafe), "expected": [reset["doc_id"]], "must_cite": [reset["doc_id"]]},
        {"question": "Is there a mobile app?", "expected": ["mobile"]}])
    first: dict = {}
    with ScriptedServer(replies=replies) as llm, \
            collect(db, "bot-a", "--questions", str(qfile), outcome=first) as url:
        run_openai_app(tracer_provider(url, "support-bot"), llm.url, ["How do I set up SSO with Okta?",
                                                                      "And without Okta?"], alone=[cafe, "What about billing?"])
    assert len(llm.posts()) == 6
    assert "expectations (support): 3 of 4 questions passed" in first["stdout"], first
    assert "support.jsonl:4: 'Is there a mobile app?'" in first["stderr"]  # the line no turn answered
    assert "1 turns no question matched" in first["stderr"] and "'What about billing?'" not in first["stderr"]
    shown = _runs(db, "show", "bot-a")
    rows = {r["line"]: r for r in shown["question_rows"]}
    assert [rows[n]["passed"] for n in (1, 2, 3, 4)] == [True, True, True, False]
    assert rows[1]["consulted"] == [okta["doc_id"]] and rows[2]["consulted"] == [setup["doc_id"]]
    assert rows[3]["consulted"] == [reset["doc_id"]] and rows[4]["turn_id"] is None
    by_turn = {t["turn_id"]: t for t in turns(db, "--run", "bot-a")}
    assert by_turn[rows[2]["turn_id"]]["position"] == 2 and by_turn[rows[2]["turn_id"]]["conversation_id"] == "otel/support-bot/chat-42"
    assert len(by_turn) == 4  # the billing turn is stored, only not scored

    worse = [openai_reply(None, [("search", {"q": "sso"})], model="loop-gpt"),
             openai_reply("Use the Okta app.", model="loop-gpt"),  # no link: nothing consulted
             openai_reply("Without Okta, follow the SSO setup.", model="loop-gpt"),
             openai_reply(None, [("search", {"q": "password"})], model="loop-gpt"),
             openai_reply("Yes, from the sign-in page.", model="loop-gpt")]
    second: dict = {}
    with ScriptedServer(replies=worse) as llm, \
            collect(db, "bot-b", "--questions", str(qfile), "--baseline", "bot-a", "--fail-on-regression",
                    rc=1, outcome=second) as url:
        run_openai_app(tracer_provider(url, "support-bot"), llm.url, ["How do I set up SSO with Okta?",
                                                                      "And without Okta?"], alone=[cafe])
    assert "REGRESSION" in second["stdout"], second
    assert "How do I set up SSO with Okta?" in second["stdout"].split("regressed questions")[1]
    compared = _runs(db, "compare", "bot-a", "bot-b")
    assert [r["name"] for r in compared["runs"]] == ["bot-a", "bot-b"]
    assert [r["provider"] for r in compared["runs"]] == ["audited", "audited"]
    assert sorted(d["question"] for d in compared["diff"]) == sorted(q["question"] for q in shown["question_rows"][:3])
