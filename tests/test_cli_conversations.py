"""Conversations on the command line (docs/cli-conversations.md): `ask --conversation`, questions files with
`"conversation"` lines (`ask --questions`, `eval`), and `workbench chat` under a real pseudo-terminal.

The model is a real Ollama client talking to a loopback server (`agent_server.AgentServer`) that keeps every
request's messages, so a test sees exactly which earlier turns each follow-up was sent. The CLI runs
in-process (`workbench.cli.main`) except where the process itself is under test: the chat on a terminal and
an eval killed with SIGTERM.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

import pytest

from agent_server import AgentServer, latest_question
from conftest import ROOT, schema_validator
from workbench.cli import main

SSO, OKTA, RESET, KEY = ("How do I configure SSO?", "And what about Okta?", "How do I reset my password?",
                         "How do I rotate an API key?")
DEADLINE_S = 180.0  # a guard against "never happens" on a loaded machine, not a speed assertion


@pytest.fixture
def ollama(monkeypatch):
    """A loopback Ollama server for the test, the environment pointed at it (no retries: a failure is final)."""
    def start(**kwargs) -> AgentServer:
        srv = AgentServer(**kwargs).__enter__()
        servers.append(srv)
        monkeypatch.setenv("OLLAMA_HOST", srv.url)
        monkeypatch.setenv("WORKBENCH_PROVIDER_RETRIES", "0")
        monkeypatch.setenv("WORKBENCH_PROVIDER_BACKOFF", "0.001")
        return srv

    servers: list[AgentServer] = []
    yield start
    for srv in servers:
        srv.release()
        srv.__exit__(None, None, None)


#: A corpus of short articles: a three-turn conversation over it fits any model's context whole (the demo corpus's
#: articles are long enough that the token budget, docs/providers.md, drops the oldest turn of three).
SMALL = [("sso-saml-setup", "Configure SAML single sign-on (SSO)", "Configure SSO with any SAML identity provider "
          "under Settings, Security. Only workspace Owners can configure it."),
         ("sso-okta", "Set up SSO with Okta", "Configure SSO with Okta: add the Orbitly app in Okta, then paste its "
          "metadata URL."),
         ("sso-azure-ad", "Set up SSO with Microsoft Entra ID (Azure AD)", "Configure SSO with Entra ID: register "
          "Orbitly as an enterprise application."),
         ("password-reset", "Reset a forgotten password", "Reset your password from the sign-in page; the reset link "
          "is valid for one hour."),
         ("api-keys-rotate", "Rotate and revoke API keys", "Rotate an API key under Settings, API; the old key stops "
          "working at once."),
         ("data-export", "Export your workspace data", "An export takes about ten minutes; how long depends on the "
          "size of the workspace.")]


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("corpus") / "small.jsonl"
    path.write_text("".join(json.dumps({"id": i, "title": t, "url": f"https://help.orbitly.example/articles/{i}",
                                        "text": x}) + "\n" for i, t, x in SMALL), encoding="utf-8")
    return str(path)


def questions_file(path, lines: list[dict]) -> str:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return str(path)


def sent_before(srv: AgentServer, question: str) -> list[str]:
    """The earlier questions (user messages) the model was sent with the first request of `question`'s turn."""
    first = next(m for m in srv.requests if latest_question(m) == question)
    users = [m["content"] for m in first if m["role"] == "user"]
    assert users[-1] == question
    return users[:-1]


def ask_json(capsys, *args: str) -> tuple[int, list[dict], str]:
    code = main(["ask", *args, "--json"])
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines()], err


# --- questions files ----------------------------------------------------------------------------------------

def test_questions_file_lines_with_one_conversation_id_are_one_conversation_in_file_order(ollama, tmp_path, capsys,
                                                                                        small_corpus):
    """Lines a, b, a, (none), b: each follow-up is sent its own conversation's earlier turns and no other's; a
    line without a conversation is a question of its own."""
    srv = ollama()
    f = questions_file(tmp_path / "q.jsonl", [
        {"question": SSO, "conversation": "a"}, {"question": RESET, "conversation": "b"},
        {"question": OKTA, "conversation": "a"}, {"question": KEY},
        {"question": "And how long is the link valid?", "conversation": "b"}])
    code, payloads, err = ask_json(capsys, "--questions", f, "--provider", "ollama", "--no-trace",
                                   "--corpus", small_corpus)
    assert code == 0, err
    assert [p["question"] for p in payloads] == [SSO, RESET, OKTA, KEY, "And how long is the link valid?"]
    assert sent_before(srv, OKTA) == [SSO]
    assert sent_before(srv, "And how long is the link valid?") == [RESET]
    assert sent_before(srv, KEY) == [] and sent_before(srv, SSO) == [] and sent_before(srv, RESET) == []
    # the follow-up's model was also sent the earlier turn's answer (what it linked) and its tool results
    first_okta = next(m for m in srv.requests if latest_question(m) == OKTA)
    assert any(m["role"] == "assistant" and "sso-saml-setup" in (m.get("content") or "") for m in first_okta)
    assert any(m["role"] == "tool" and '"sso-saml-setup"' in (m.get("content") or "") for m in first_okta)
    # the context policy is recorded with every turn of a conversation, and only there
    assert [(p["config"].get("context") or {}).get("turns") for p in payloads] == [2, 2, 2, None, 2]


def test_context_turns_0_sends_earlier_answers_without_their_tool_results(ollama, tmp_path, capsys):
    srv = ollama()
    f = questions_file(tmp_path / "q.jsonl", [{"question": SSO, "conversation": "a"},
                                              {"question": OKTA, "conversation": "a"}])
    code, payloads, err = ask_json(capsys, "--questions", f, "--provider", "ollama", "--no-trace", "--context-turns", "0")
    assert code == 0, err
    first_okta = next(m for m in srv.requests if latest_question(m) == OKTA)
    assert [m["role"] for m in first_okta] == ["system", "user", "assistant", "user"]  # question, answer, question
    assert payloads[1]["config"]["context"]["turns"] == 0


@pytest.mark.parametrize("value,message", [
    (3, "a conversation id must be non-empty text, not 3"),
    ("  ", "a conversation id must be non-empty text"),
    ("a\x1b]52;c;aGk=\x07b", "must be printable text without control characters"),
    ("x" * 201, "at most 200 characters"),
])
def test_a_bad_conversation_id_in_a_questions_file_names_the_line(tmp_path, capsys, value, message):
    f = questions_file(tmp_path / "q.jsonl", [{"question": SSO, "conversation": "ok"},
                                              {"question": OKTA, "conversation": value}])
    assert main(["ask", "--questions", f, "--no-trace"]) == 2
    err = capsys.readouterr().err
    assert f'{f}:2: "conversation": a conversation id ' in err and message in err and "Traceback" not in err
    assert "\x1b" not in err  # the refused id is shown with its control characters made visible


@pytest.mark.parametrize("args,message", [
    (["ask", SSO, "--context-turns", "51"], "must be from 0 to 50, not 51"),
    (["ask", SSO, "--context-turns", "-1"], "must be from 0 to 50, not -1"),
    (["ask", SSO, "--context-turns", "two"], "'two' is not a whole number"),
    (["ask", SSO, "--conversation", "c", "--no-trace"], "--conversation continues a conversation from the trace "
                                                        "database, which --no-trace turns off"),
    (["ask", "--questions", "q.jsonl", "--conversation", "c"], "--conversation goes with one QUESTION"),
    (["ask", SSO, "--conversation", ""], "a conversation id must be non-empty text"),
    (["chat", "--conversation", "c", "--no-trace"], "which --no-trace turns off"),
])
def test_bad_conversation_options_exit_2_with_a_clear_message(capsys, args, message):
    with pytest.raises(SystemExit) if "--context-turns" in args else _nothing():
        assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# --- workbench chat, on a real pseudo-terminal ---------------------------------------------------------------

class Chat:
    """`python -m workbench chat …` on a pseudo-terminal (pexpect): the user types, the test waits for what
    the chat prints (every wait is on output, with a deadline)."""

    def __init__(self, *args: str, env: dict[str, str] | None = None):
        import pexpect

        self.child = pexpect.spawn(sys.executable, ["-m", "workbench", "chat", *args], cwd=str(ROOT),
                                   env={**os.environ, **(env or {})}, encoding="utf-8", timeout=DEADLINE_S,
                                   dimensions=(40, 200))
        self.seen = ""

    def expect(self, text: str) -> str:
        """Wait for `text`; return what came before it (since the last wait)."""
        self.child.expect_exact(text)
        before = self.child.before + self.child.after
        self.seen += before
        return before

    def say(self, line: str) -> str:
        """Type a line, wait for the next prompt; what the chat printed in between."""
        from workbench.commands.chat import PROMPT

        self.child.sendline(line)
        return self.expect(PROMPT)

    def quit(self) -> int:
        import pexpect

        self.child.sendline("/quit")
        self.child.expect(pexpect.EOF)
        self.seen += self.child.before
        self.child.close()
        return self.child.exitstatus


@pytest.fixture
def chat_env(ollama, demo_session):
    demo_session.toolbox  # the demo index built once into this test session's cache, where the chat finds it
    srv = ollama()
    return srv, {"OLLAMA_HOST": srv.url, "WORKBENCH_PROVIDER_RETRIES": "0"}


def test_chat_on_a_terminal_follows_up_shows_sources_verifies_and_starts_anew(chat_env):
    from workbench.commands.chat import PROMPT

    srv, env = chat_env
    chat = Chat("--provider", "ollama", "--no-trace", env=env)
    try:
        intro = chat.expect(PROMPT)
        assert "Commands: /new, /sources, /verify, /quit." in intro and "(new)" in intro
        first = chat.say(SSO)
        assert "See [Configure SAML single sign-on (SSO)](https://help.orbitly.example/articles/sso-saml-setup)" in first
        assert "Sources: Configure SAML single sign-on (SSO) <https://help.orbitly.example/articles/sso-saml-setup>" in first
        assert "retrieved 5 · cited 1 · consulted 1" in first and "· turn 1 ·" in first  # as `ask` prints it
        sources = chat.say("/sources")
        assert f"Turn 1: {SSO}" in sources
        assert "Configure SAML single sign-on (SSO) (sso-saml-setup) · full · cited, consulted: opened in full" in sources
        assert "Set up SSO with Okta (sso-okta) · snippet · not consulted" in sources
        second = chat.say(OKTA)
        assert "See [Set up SSO with Okta](https://help.orbitly.example/articles/sso-okta)" in second
        assert "· turn 2 ·" in second
        assert sent_before(srv, OKTA) == [SSO]  # the follow-up was sent the conversation so far
        verified = chat.say("/verify")
        assert "Verified by ablation" in verified and "load-bearing: Set up SSO with Okta" in verified
        assert "unknown command /nope" in chat.say("/nope")
        assert "(new)" in chat.say("/new")
        assert "no answer yet in this conversation" in chat.say("/sources")
        assert "· turn 1 ·" in chat.say(KEY)
        assert sent_before(srv, KEY) == []  # a new conversation sends no earlier turn
        assert chat.quit() == 0
    finally:
        chat.child.close(force=True)
    assert "Traceback" not in chat.seen


def test_chat_neutralises_terminal_controls_in_documents_and_answers(chat_env, tmp_path):
    """A document title that writes the clipboard (OSC 52) and reverses text (U+202E), linked by the answer:
    the terminal gets visible escapes, never the control characters."""
    from workbench.commands.chat import PROMPT

    srv, env = chat_env
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "evil", "title": "Evil \x1b]52;c;cHduZWQ=\x07 guide \u202eevil",
                                  "url": "https://h.example/evil", "text": "How to configure the evil widget."})
                      + "\n", encoding="utf-8")
    chat = Chat("--provider", "ollama", "--no-trace", "--corpus", str(corpus), env=env)
    try:
        chat.expect(PROMPT)
        out = chat.say("How do I configure the evil widget?")
        assert "Sources: Evil \\x1b]52;c;cHduZWQ=\\x07 guide \\u202eevil <https://h.example/evil>" in out
        assert "\x1b" not in out and "\u202e" not in out and "\x07" not in out
        assert chat.quit() == 0
    finally:
        chat.child.close(force=True)
    assert "\x1b]52" not in chat.seen


# --- eval ----------------------------------------------------------------------------------------------------

A3, B2 = "How long does that take?", "And how long is the link valid?"
EVAL_LINES = [{"question": SSO, "conversation": "a"}, {"question": RESET, "conversation": "b"},
              {"question": OKTA, "conversation": "a"}, {"question": KEY},
              {"question": A3, "conversation": "a"}, {"question": B2, "conversation": "b"}]


def written(db) -> list[tuple[str, str]]:
    """(question, status) of every turn, in the order written."""
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute("SELECT question, status FROM turns ORDER BY rowid").fetchall()


def test_eval_runs_each_conversation_in_order_and_conversations_side_by_side(ollama, tmp_path, capsys, small_corpus):
    """--concurrency 3: the turns of conversation a run one after the other, each sent the ones before it, while
    b and the single question run beside them; the store gets the turns in file order."""
    srv = ollama(delay=0.05)
    f, db = questions_file(tmp_path / "q.jsonl", EVAL_LINES), tmp_path / "t.duckdb"
    code = main(["eval", f, "--provider", "ollama", "--db", str(db), "--no-progress", "--concurrency", "3",
                 "--corpus", small_corpus])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert sent_before(srv, OKTA) == [SSO] and sent_before(srv, A3) == [SSO, OKTA]
    assert sent_before(srv, B2) == [RESET] and sent_before(srv, KEY) == []
    assert srv.max_in_flight > 1, "turns of different conversations ran at once"
    assert written(db) == [(line["question"], "ok") for line in EVAL_LINES]
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:  # the dataset's lines keep their conversation
        extras = con.execute("SELECT extra_json FROM expectations ORDER BY line").fetchall()
    assert [json.loads(e)["conversation"] if e else None for e, in extras] == \
        [line.get("conversation") for line in EVAL_LINES]


def test_a_failed_turn_ends_its_conversation_for_the_batch(ollama, tmp_path, capsys):
    """Turn 2 of conversation a fails: turn 3 would follow a turn the model never had, so it is not asked (and
    says so); conversation b and the single question are asked as usual."""
    srv = ollama(fail=OKTA)
    f, db = questions_file(tmp_path / "q.jsonl", EVAL_LINES), tmp_path / "t.duckdb"
    code = main(["eval", f, "--provider", "ollama", "--db", str(db), "--no-progress", "--concurrency", "2"])
    out, err = capsys.readouterr()
    assert code == 1
    assert re.search(r"^not asked \(an earlier turn of its conversation failed\) +1$", out, re.M), out
    assert not any(latest_question(m) == A3 for m in srv.requests)
    assert [q for q, _ in written(db)] == [SSO, RESET, OKTA, KEY, B2]
    assert dict(written(db))[OKTA] == "server_error"


RESUME_LINES = [{"question": SSO, "conversation": "a"}, {"question": OKTA, "conversation": "a"},
                {"question": A3, "conversation": "a"}, {"question": KEY}, {"question": SSO}]


def stored_turns(db) -> list[tuple]:
    """(run_id, question, status, conversation_id, position) of every turn, in the order written."""
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute("SELECT run_id, question, status, conversation_id, position FROM turns ORDER BY rowid"
                           ).fetchall()


def first_request(srv: AgentServer, question: str) -> list[dict]:
    return next(m for m in srv.requests if latest_question(m) == question)


def test_eval_killed_in_the_middle_of_a_conversation_resumes_it_with_the_turns_already_written(
        ollama, tmp_path, demo_session):
    """SIGTERM while turn 2 of conversation a is at the model: turn 1 is kept. The same command resumes the
    run: turn 1 is not asked again, and turns 2 and 3 are sent exactly the history an uninterrupted run sends
    them (turn 1 rebuilt from the trace store), then stored at positions 2 and 3 of the same conversation. The
    last line asks turn 1's question on its own: the conversation's answer does not count for it."""
    import signal
    import subprocess

    demo_session.toolbox  # the demo index built once into this test session's cache, where the eval finds it
    f = questions_file(tmp_path / "q.jsonl", RESUME_LINES)
    whole = ollama()  # the oracle: the same file, never interrupted
    assert main(["eval", f, "--provider", "ollama", "--db", str(tmp_path / "whole.duckdb"), "--no-progress"]) == 0

    db = tmp_path / "t.duckdb"
    command = [sys.executable, "-m", "workbench", "eval", f, "--provider", "ollama", "--db", str(db), "--no-progress"]
    held = ollama(hold=OKTA)
    env = {**os.environ, "OLLAMA_HOST": held.url, "WORKBENCH_PROVIDER_RETRIES": "0"}
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert held.held.wait(DEADLINE_S), "turn 2 never reached the model"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=DEADLINE_S)
    finally:
        held.release()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, err[-2000:]
    assert "kept 1 finished turn of 5" in err
    (run_id, *first), = stored_turns(db)
    assert first == [SSO, "ok", f"{run_id}/a", 1]

    again = ollama()
    env["OLLAMA_HOST"] = again.url
    resumed = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=DEADLINE_S)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert re.search(r"^skipped \(already answered\) +1$", resumed.stdout, re.M), resumed.stdout
    asked = [m for m in again.requests if latest_question(m) == SSO and m[-1]["role"] == "user"]
    assert len(asked) == 1 and sent_before(again, SSO) == [], "only the single question is asked, on its own"
    for q in (OKTA, A3):
        assert first_request(again, q) == first_request(whole, q), f"{q!r} was sent another history"
    assert [t[1:] for t in stored_turns(db)] == [
        (SSO, "ok", f"{run_id}/a", 1), (OKTA, "ok", f"{run_id}/a", 2), (A3, "ok", f"{run_id}/a", 3),
        (KEY, "ok", None, None), (SSO, "ok", None, None)]
    assert {t[0] for t in stored_turns(db)} == {run_id}


# --- ask --conversation: a conversation across commands, through the trace store ------------------------------

def test_ask_conversation_goes_on_from_the_trace_store_under_the_context_policy(ollama, tmp_path, capsys,
                                                                               small_corpus):
    """Three `ask --conversation c-7 --context-turns 1` commands: each loads the turns before it from the trace
    database; turn 3 is sent turn 2 with its tool results and turn 1 as question and answer only."""
    srv = ollama()
    db = str(tmp_path / "t.duckdb")
    payloads = []
    for q in (SSO, OKTA, A3):
        code, (payload,), err = ask_json(capsys, q, "--conversation", "c-7", "--context-turns", "1",
                                         "--provider", "ollama", "--db", db, "--corpus", small_corpus)
        assert code == 0, err
        payloads.append(payload)
    assert [(p["conversation_id"], p["position"]) for p in payloads] == [("c-7", 1), ("c-7", 2), ("c-7", 3)]
    validator = schema_validator("payload.schema.json")
    for p in payloads:
        validator.validate(p)
    assert sent_before(srv, OKTA) == [SSO] and sent_before(srv, A3) == [SSO, OKTA]
    roles = [m["role"] for m in first_request(srv, A3)]
    # system; turn 1: question, answer; turn 2: question, each step's tool call and result, answer; turn 3's question
    assert roles == ["system", "user", "assistant", "user", "assistant", "tool", "assistant", "tool", "assistant",
                     "user"], roles
    assert [t[1:] for t in stored_turns(db)] == [(SSO, "ok", "c-7", 1), (OKTA, "ok", "c-7", 2), (A3, "ok", "c-7", 3)]
    # another conversation id starts afresh
    code, (other,), _ = ask_json(capsys, KEY, "--conversation", "c-8", "--provider", "ollama", "--db", db,
                                 "--corpus", small_corpus)
    assert code == 0 and (other["conversation_id"], other["position"]) == ("c-8", 1) and sent_before(srv, KEY) == []


def test_chat_goes_on_with_a_stored_conversation_and_stores_its_turns(chat_env, tmp_path, capsys, small_corpus):
    from workbench.commands.chat import PROMPT

    srv, env = chat_env
    db = str(tmp_path / "t.duckdb")
    for q in (SSO, OKTA):
        assert main(["ask", q, "--conversation", "sso", "--provider", "ollama", "--db", db, "--corpus", small_corpus]) == 0
    capsys.readouterr()
    chat = Chat("--provider", "ollama", "--db", db, "--conversation", "sso", "--corpus", small_corpus, env=env)
    try:
        intro = chat.expect(PROMPT)
        assert f"conversation sso: going on after its 2 earlier turn(s); the last question was: {OKTA}" in intro
        assert "· turn 3 ·" in chat.say(A3)
        assert chat.quit() == 0
    finally:
        chat.child.close(force=True)
    assert sent_before(srv, A3) == [SSO, OKTA]
    assert [t[1:] for t in stored_turns(db)] == [(SSO, "ok", "sso", 1), (OKTA, "ok", "sso", 2), (A3, "ok", "sso", 3)]


# --- the acceptance: a scripted OpenAI-compatible model, three turns, --context-turns 1 ----------------

URL = "https://help.orbitly.example/articles/"
SAML, OKTA_DOC, AZURE = "sso-saml-setup", "sso-okta", "sso-azure-ad"


@pytest.fixture(scope="module")
def three_turns(tmp_path_factory, small_corpus):
    """`ask --conversation c-3 --context-turns 1` three times against a scripted OpenAI-compatible server.
    Turn 1 searches and opens the SAML article; turn 2 calls no tool and cites the Okta article (a search hit
    of turn 1) and the SAML article; turn 3 calls no tool and cites Okta (linked by turn 2) and Entra ID (only a
    search hit of turn 1, whose tool results the policy no longer keeps)."""
    import contextlib
    import io

    from loopback import ScriptedServer, openai_reply

    db = tmp_path_factory.mktemp("three") / "t.duckdb"
    replies = [
        openai_reply(None, [("search", {"query": SSO})]),
        openai_reply(None, [("fetch_document", {"doc_id": SAML})]),
        openai_reply(f"Set it up under Settings → Security ([Configure SAML single sign-on (SSO)]({URL}{SAML}))."),
        openai_reply(f"For Okta follow [Set up SSO with Okta]({URL}{OKTA_DOC}); the SAML basics are in "
                     f"[Configure SAML single sign-on (SSO)]({URL}{SAML})."),
        openai_reply(f"About ten minutes with [Set up SSO with Okta]({URL}{OKTA_DOC}); Entra ID is similar "
                     f"([Set up SSO with Microsoft Entra ID]({URL}{AZURE}))."),
    ]
    payloads = []
    with ScriptedServer(replies) as srv:
        for q in (SSO, OKTA, A3):
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(["ask", q, "--conversation", "c-3", "--context-turns", "1", "--provider", "openai",
                             "-o", f"base_url={srv.url}/v1", "-o", "api_key=sk-test-not-a-real-key", "--db", str(db),
                             "--corpus", small_corpus, "--json"])
            assert code == 0, err.getvalue()
            payloads.append(json.loads(out.getvalue()))
    return payloads, [r.body["messages"] for r in srv.requests if r.method == "POST"], db


def test_three_turns_are_sent_their_history_in_the_openai_wire_format_and_stored_in_order(three_turns):
    payloads, requests, db = three_turns
    assert [p["status"] for p in payloads] == ["ok"] * 3
    t1 = payloads[0]["turn_id"]
    # turn 2 (turn 1 full): question, each model step's tool call and its result, the answer
    second = requests[3]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant",
                                           "user"]
    calls = [c for m in second if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    assert [c["function"]["name"] for c in calls] == ["search", "fetch_document"]
    assert [m["tool_call_id"] for m in second if m["role"] == "tool"] == [c["id"] for c in calls]
    # turn 3 (turn 1 answer only, turn 2 full — it called no tool): questions and answers
    third = requests[4]
    assert [(m["role"], m["content"]) for m in third[1:]] == [
        ("user", SSO), ("assistant", payloads[0]["answer"]), ("user", OKTA), ("assistant", payloads[1]["answer"]),
        ("user", A3)]
    assert [t[1:] for t in stored_turns(db)] == [(SSO, "ok", "c-3", 1), (OKTA, "ok", "c-3", 2), (A3, "ok", "c-3", 3)]
    assert [(p["conversation_id"], p["position"]) for p in payloads] == [("c-3", 1), ("c-3", 2), ("c-3", 3)]
    assert payloads[2]["config"]["context"]["turns"] == 1 and t1


def test_three_turns_get_the_design_s_sets_in_every_turn(three_turns):
    """The §11 sets, worked out by hand from the rules (not by the code under test). Rule 1 reads "accepted" as
    accepted when that earlier answer was given: turn 2's link to sso-okta (carried then from turn 1's search)
    stays in turn 3's context as a title exposure, although turn 1's search results are no longer there."""
    payloads, _, _ = three_turns
    first, second, third = payloads
    hits = set(first["sets"]["retrieved"])
    assert {SAML, OKTA_DOC, AZURE} <= hits, "the scenario needs Okta and Entra ID among turn 1's search hits"
    # turn 1: a single turn (§1)
    assert first["sets"]["cited"] == [SAML] and first["sets"]["consulted"] == [SAML]
    # turn 2: everything turn 1 exposed is carried (turn 1 is `full`); both cited documents are consulted (rule b:
    # SAML was read in full, Okta as a snippet), the other carried hits are not (rule c)
    assert set(second["sets"]["retrieved"]) == hits
    assert second["sets"]["cited"] == [OKTA_DOC, SAML] and set(second["sets"]["consulted"]) == {OKTA_DOC, SAML}
    assert second["rejected_citations"] == []
    assert {d["doc_id"]: (d.get("carried_from"), d.get("carried_position")) for d in second["documents"]} == \
        {d: (first["turn_id"], 1) for d in hits}
    assert {d["doc_id"]: d["reason"] for d in second["documents"] if not d["consulted"]} == \
        {d: "read in turn 1, not cited here" for d in hits - {OKTA_DOC, SAML}}
    # turn 3: turn 1 keeps only its answer, turn 2 is `full` but called no tool: only the links of accepted
    # citations are in context (title exposure, never consulted: rule d); Entra ID was only in turn 1's dropped
    # search results: `not_in_context`, naming turn 1
    assert set(third["sets"]["retrieved"]) == {OKTA_DOC, SAML}
    assert third["sets"]["cited"] == [OKTA_DOC] and third["sets"]["consulted"] == []
    assert [(r["target"], r["reason"], r.get("turn_id"), r.get("position")) for r in third["rejected_citations"]] == \
        [(f"{URL}{AZURE}", "not_in_context", first["turn_id"], 1)]
    assert {d["doc_id"]: d.get("carried_from") for d in third["documents"]} == \
        {OKTA_DOC: second["turn_id"], SAML: second["turn_id"]}


def wait_until(condition, what: str, deadline_s: float = DEADLINE_S) -> None:
    """Poll `condition` until it holds; fail naming `what` after `deadline_s` (a guard, not a pace)."""
    end = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < end, f"never happened: {what}"
        time.sleep(0.01)


def _blocked_writing(pid: int) -> bool:
    """Whether process `pid` is asleep in a write(2) (Linux: /proc/PID/syscall starts with its number, 1)."""
    try:
        return Path(f"/proc/{pid}/syscall").read_text().split()[0] == "1"
    except (OSError, IndexError):
        return False


@pytest.mark.skipif(not Path("/proc/self/syscall").exists(), reason="needs Linux's /proc/PID/syscall")
def test_a_ctrl_c_that_comes_before_the_chat_waits_for_a_line_is_not_lost(chat_env):
    """The chat shows its prompt, then waits for a line. A Ctrl-C between the two (a loaded machine preempts the
    chat right after the prompt) was lost: `input()` only checks for a signal when its read fails, and a read
    that starts after the signal never fails. Here the gap is made as long as the test needs: the terminal's
    output is stopped (XOFF, Ctrl-S) so the prompt's write waits, and the Ctrl-C comes while it does."""
    import pexpect

    from workbench.commands.chat import PROMPT

    _, env = chat_env
    chat = Chat("--provider", "ollama", "--no-trace", env=env)
    try:
        chat.expect(PROMPT)
        chat.child.send("\x13")  # XOFF: the terminal holds the chat's output
        chat.child.sendline("")  # an empty line: the chat shows its prompt again at once
        wait_until(lambda: _blocked_writing(chat.child.pid), "the chat writing its prompt to a stopped terminal")
        chat.child.sendintr()  # the terminal passes Ctrl-C on as SIGINT, and restarts its output (IXON)
        # the Ctrl-C is answered; the prompt whose write it interrupted may reach the terminal before the answer
        chat.expect("(/quit or Ctrl-D to leave)")
        chat.expect(PROMPT)
        chat.child.sendeof()
        chat.child.expect(pexpect.EOF)
    finally:
        chat.child.close(force=True)


def test_ctrl_c_in_the_chat_drops_the_question_being_answered_and_never_leaves_by_accident(ollama, demo_session):
    """Ctrl-C while the model answers drops that question (it is not history for the next one); Ctrl-C at the
    prompt only says how to leave; Ctrl-D leaves."""
    import pexpect

    from workbench.commands.chat import PROMPT

    demo_session.toolbox
    srv = ollama(hold=RESET)
    chat = Chat("--provider", "ollama", "--no-trace", env={"OLLAMA_HOST": srv.url, "WORKBENCH_PROVIDER_RETRIES": "0"})
    try:
        chat.expect(PROMPT)
        assert "· turn 1 ·" in chat.say(SSO)
        chat.child.sendline(RESET)
        assert srv.held.wait(DEADLINE_S), "the question never reached the model"
        chat.child.sendintr()
        assert "(interrupted: that question was dropped" in chat.expect(PROMPT)
        srv.release()
        assert "· turn 2 ·" in chat.say(OKTA)
        assert sent_before(srv, OKTA) == [SSO]  # the dropped question is not part of the conversation
        chat.child.sendintr()
        chat.expect("(/quit or Ctrl-D to leave)")  # waited for itself, not for the next prompt (see above)
        chat.expect(PROMPT)
        chat.child.sendeof()
        chat.child.expect(pexpect.EOF)
        chat.child.close()
        assert chat.child.exitstatus == 0
    finally:
        chat.child.close(force=True)


def test_a_listing_asked_third_gets_no_claims_judged_as_when_asked_alone(tmp_path, capsys):
    """Issue 41 item 4 on the command line, offline: the listing at position 3 stores no claim, like the listing
    asked alone; the two SSO answers before it do."""
    db = str(tmp_path / "traces.duckdb")
    for q in (SSO, OKTA, "What articles do you have?"):
        assert main(["ask", q, "--conversation", "c1", "--db", db]) == 0
    assert main(["ask", "What articles do you have?", "--db", db]) == 0
    capsys.readouterr()
    import duckdb

    with duckdb.connect(db, read_only=True) as con:
        rows = con.execute("SELECT t.question, t.position, count(c.turn_id) FROM turns t LEFT JOIN claims c "
                           "USING (turn_id) GROUP BY t.turn_id, t.question, t.position").fetchall()
    judged = {(q, p): n for q, p, n in rows}
    assert judged[(SSO, 1)] > 0 and judged[(OKTA, 2)] > 0
    assert judged[("What articles do you have?", 3)] == 0
    assert [n for (q, p), n in judged.items() if q.startswith("What") and p != 3] == [0]
