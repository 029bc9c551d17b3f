"""No request leaves for a server outside the allow-list: an allowed server that answers a redirect cannot
forward a chat (or embedding) request anywhere (docs/security.md, "Redirects").

Server A is listed in `WORKBENCH_ALLOWED_SERVERS` and answers every request with a redirect to server B,
another loopback port that is not listed. Through each official client, as the providers use it, B must
receive nothing, and the turn ends with status `redirect_refused` naming where it was sent.
"""

from __future__ import annotations

import pytest

from loopback import WIRES, RedirectServer, ScriptedServer
from workbench.errors import EmbeddingError

QUESTION = "How do I configure SSO?"
both = pytest.mark.parametrize("wire", list(WIRES.values()), ids=list(WIRES))
codes = pytest.mark.parametrize("code", [302, 307, 308])


@pytest.fixture
def servers(monkeypatch):
    """(A, B): A allowed and redirecting to B; B answers anything (its answer must never be asked for)."""
    def start(wire, code):
        b = ScriptedServer([wire.reply("from the server that is not allowed", [])], repeat_last=True)
        b.__enter__()
        a = RedirectServer(b.url, code).__enter__()
        monkeypatch.setenv("WORKBENCH_ALLOWED_SERVERS", a.url + wire.url_suffix)
        started.extend([a, b])
        return a, b

    started = []
    yield start
    for s in started:
        s.__exit__(None, None, None)


def assert_refused(record, a, b):
    assert b.requests == [], [r.path for r in b.requests]  # nothing reached the server outside the list
    assert record.status == "redirect_refused", (record.status, record.error)
    assert record.answer == "" and "a redirect" in record.error and "never followed" in record.error, record.error
    if record.config["provider"] != "ollama":  # the Ollama client keeps no headers of an error answer
        assert b.url in record.error, record.error  # where it was sent on
    # a redirect is not retried (Ollama's /api/show, which asks the model's context first, is redirected too)
    assert len([r for r in a.requests if r.method == "POST" and r.path != "/api/show"]) == 1


@both
@codes
def test_a_redirect_from_an_allowed_server_is_not_followed(wire, code, servers, demo_session):
    a, b = servers(wire, code)
    result = demo_session.ask(QUESTION, provider=wire.provider, judge=None, **wire.options(a.url))
    assert_refused(result.record, a, b)
    assert str(code) in result.record.error


@both
def test_the_operators_configured_server_cannot_redirect_either(wire, servers, monkeypatch, capsys):
    from workbench.cli import main

    a, b = servers(wire, 307)
    for name, value in wire.env(a.url).items():
        monkeypatch.setenv(name, value)
    code = main(["ask", "--provider", wire.provider, "--no-trace", QUESTION])
    err = capsys.readouterr().err
    assert code == 1 and "turn failed (redirect_refused)" in err, err
    assert b.requests == []


@both
def test_a_redirect_ends_the_turn_in_the_app_too(wire, servers, app, monkeypatch):
    """The hostile run's own path: a visitor types the allowed server in the sidebar."""
    from apptest import ask

    a, b = servers(wire, 307)
    if wire.test_key:
        monkeypatch.setenv(wire.key_env, wire.test_key)
    at = app.sidebar.selectbox(key="cfg_provider").set_value(wire.provider).run()
    at.sidebar.text_input(key=f"cfg_opt_{wire.provider}_{wire.url_option}").input(a.url + wire.url_suffix).run()
    at = ask(at, QUESTION)
    assert not at.exception, at.exception
    turn = at.session_state["turns"][-1]
    assert turn.payload.status == "redirect_refused", (turn.error, turn.payload.error)
    assert b.requests == [] and a.requests


@pytest.mark.parametrize("backend", ["ollama", "gemini"])
def test_embedding_clients_do_not_follow_redirects(backend, servers):
    from workbench.retrieval.embeddings import embedding_for

    wire = WIRES[backend]
    a, b = servers(wire, 307)
    options = {"host": a.url} if backend == "ollama" else {"api_key": wire.test_key, "base_url": a.url}
    with pytest.raises(EmbeddingError):
        embedding_for(backend, **options).embed_array(["single sign-on"])
    assert b.requests == [] and a.requests
