"""An answer cut off at the output token limit ends `truncated`, for every provider (docs/providers.md, "Faults").

Through the official clients against loopback servers: OpenAI-compatible `finish_reason: "length"`, Ollama
`done_reason: "length"`, Gemini `finishReason: "MAX_TOKENS"`. The answer is kept, its sets computed; it is no doc gap
and fails an experiment's status assertion; the CLI warns. Before the fix such a turn was `ok`, and a cut answer
that consulted nothing went to the doc-gap queue as an article to write.
"""

from __future__ import annotations

import duckdb
import pytest

from clirun import cli
from loopback import GEMINI, OLLAMA, OPENAI, WIRES, ScriptedServer
from workbench.session import Session

QUESTION = "How do I configure SSO?"
DOC, URL = "sso-saml-setup", "https://help.orbitly.example/articles/sso-saml-setup"
CUT = {"ollama": {"done_reason": "length"}, "gemini": {"finish": "MAX_TOKENS"}, "openai": {"finish": "length"}}


def script(wire, text: str):
    return [wire.reply("", [("search", {"query": "configure SSO"})]), wire.reply(text, **CUT[wire.provider])]


@pytest.mark.parametrize("wire", list(WIRES.values()), ids=list(WIRES))
def test_an_answer_cut_at_the_token_limit_ends_truncated_and_keeps_its_answer_and_sets(wire, tmp_path):
    db = tmp_path / "traces.duckdb"
    session = Session.open(trace_db=db)
    with ScriptedServer(script(wire, f"Paste the metadata ([SAML SSO]({URL})) and then")) as srv:
        answer = session.ask(QUESTION, provider=wire.provider, **wire.options(srv.url))
    record, payload = answer.record, answer.payload
    assert record.status == payload.status == "truncated", (record.status, record.error)
    assert "token limit" in record.error
    assert payload.answer.endswith("and then"), "the answer is kept"
    assert payload.sets.cited == (DOC,) and payload.sets.consulted == (DOC,), "its sets are computed"
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT status FROM turns").fetchall() == [("truncated",)]


@pytest.mark.parametrize("wire", [OPENAI, OLLAMA, GEMINI], ids=["openai", "ollama", "gemini"])
def test_a_truncated_answer_that_consulted_nothing_is_no_doc_gap(wire, tmp_path):
    db = tmp_path / "traces.duckdb"
    session = Session.open(trace_db=db)
    with ScriptedServer([wire.reply("You", **CUT[wire.provider])]) as srv:
        answer = session.ask(QUESTION, provider=wire.provider, **wire.options(srv.url))
    assert answer.record.status == "truncated" and answer.payload.sets.consulted == ()
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM doc_gaps").fetchone() == (0,)


def test_the_cli_warns_and_prints_the_cut_answer(tmp_path):
    with ScriptedServer([OPENAI.reply("You", finish="length")]) as srv:
        r = cli("ask", "--provider", "openai", "--model", OPENAI.model, "-o", "max_tokens=1", "--no-trace", QUESTION,
                env=OPENAI.env(srv.url))
    assert "warning: the answer is incomplete (truncated)" in r.stderr and "max_tokens" in r.stderr, r.stderr
    assert r.returncode == 0 and r.stdout.startswith("You") and "turn failed" not in r.stderr
    assert srv.posts()[0].body["max_tokens"] == 1


def test_a_truncated_experiment_turn_fails_its_status_assertion(tmp_path):
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"question": "How do I configure SSO?", "expected": ["sso-saml-setup"]}\n', encoding="utf-8")
    db = tmp_path / "t.duckdb"
    with ScriptedServer([OPENAI.reply("", [("fetch_document", {"doc_id": DOC})]),
                         OPENAI.reply(f"Paste the metadata ([SAML SSO]({URL})) and", finish="length")]) as srv:
        r = cli("eval", str(questions), "--db", str(db), "--name", "cut", "--no-progress", "--provider", "openai",
                "--model", OPENAI.model, env=OPENAI.env(srv.url))
    assert r.returncode in (0, 1), r.stderr
    with duckdb.connect(str(db), read_only=True) as con:
        row = con.execute("SELECT status, expected_consulted, status_ok, passed FROM expectation_results").fetchone()
    assert row == ("truncated", True, False, False), "consulted as expected, yet the turn fails: it was cut off"
