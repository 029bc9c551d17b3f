"""Credentials embedded in provider URLs (`http://user:pass@host`) never reach a message, a trace or a
log (issue 17, item 8), like API keys; and they are really sent (as HTTP basic auth), not dropped."""

from __future__ import annotations

import base64
import json
import logging

import duckdb
import pytest

from clirun import cli
from loopback import WIRES, ScriptedServer, refused_url
from tracedb import empty_trace_db
from workbench.providers.base import ModelStep, Provider, register_provider
from workbench.redact import scrub_secrets
from workbench.session import Session

USER, PASSWORD = "alice", "S3cret-pass-0987"
both = pytest.mark.parametrize("wire", list(WIRES.values()), ids=list(WIRES))


def _with_userinfo(url: str, userinfo: str = f"{USER}:{PASSWORD}") -> str:
    return url.replace("http://", f"http://{userinfo}@", 1)


def _leaks(text: str) -> bool:
    return PASSWORD in text or f"{USER}:" in text


@pytest.mark.parametrize("text", [
    f"cannot connect to http://{USER}:{PASSWORD}@127.0.0.1:9/api",
    f"at HTTPS://{USER}:{PASSWORD}@host.example:443/v1 failed",
    f"url='http://{USER}:{PASSWORD}@host' (see also http://{USER}:{PASSWORD}@other/x)",
    f"http://{USER}:p@ss@{PASSWORD}@host/x",  # an unencoded @ in the password: up to the last @
    f"ws://{USER}:{PASSWORD}@h", f"http://{PASSWORD}@h/x",  # a token as the user name
])
def test_redact_removes_userinfo_from_any_url(text):
    out = scrub_secrets(text)
    assert PASSWORD not in out and f"{USER}:" not in out and "[redacted]@" in out


def test_redact_removes_credentials_of_schemeless_configured_urls(monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", f"{USER}:{PASSWORD}@127.0.0.1:11434")
    assert PASSWORD not in scrub_secrets(f"cannot connect to {USER}:{PASSWORD}@127.0.0.1:11434")
    assert PASSWORD not in scrub_secrets(f"the server said: bad password {PASSWORD}")


@both
@pytest.mark.parametrize("fault", ["server_error", "auth_error", "connection_error"])
def test_url_credentials_never_reach_errors_payloads_traces_or_logs(wire, fault, tmp_path, caplog):
    """Before the fix the URL with its password was printed and stored in turns.error (and httpx logged it)."""
    caplog.set_level(logging.DEBUG)
    session = Session.open(trace_db=empty_trace_db(tmp_path / "t.duckdb"))
    if fault == "connection_error":
        result = session.ask("How do I configure SSO?", provider=wire.provider,
                             **wire.options(_with_userinfo(refused_url()), retries=0))
        sent = None
    else:
        reply = wire.error(401 if fault == "auth_error" else 500, "nope")
        with ScriptedServer([reply], repeat_last=True) as srv:
            result = session.ask("How do I configure SSO?", provider=wire.provider,
                                 **wire.options(_with_userinfo(srv.url), retries=0))
        sent = srv.posts()[0].headers.get("authorization")
    assert result.record.status == fault, result.record.error
    assert not _leaks(result.record.error)
    assert not _leaks(json.dumps(result.payload.to_json())) and not _leaks(json.dumps(result.record.to_dict(), default=str))
    con = duckdb.connect(str(tmp_path / "t.duckdb"), read_only=True)
    stored = json.dumps(con.execute("SELECT t.error, r.config_json FROM turns t JOIN runs r USING (run_id)").fetchall())
    con.close()
    assert not _leaks(stored)
    assert not _leaks(caplog.text)
    if sent is not None:  # the credentials were used, as HTTP basic auth
        assert sent == "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


@both
def test_cli_never_prints_url_credentials(wire, tmp_path, caplog):
    """In this process (tests/clirun.py): what a `workbench` process would print on stderr, and every log record
    at any level (a process prints those of WARNING and above through logging's last-resort handler)."""
    caplog.set_level(logging.DEBUG)
    with ScriptedServer([wire.error(500, "nope")], repeat_last=True) as srv:
        env = {**wire.env(_with_userinfo(srv.url)), "WORKBENCH_PROVIDER_RETRIES": "0"}
        r = cli("ask", "--provider", wire.provider, "-k", "3", "How do I configure SSO?",
                "--db", str(empty_trace_db(tmp_path / "t.duckdb")), env=env)
    assert r.returncode == 1 and "turn failed (server_error)" in r.stderr, r.stderr
    assert not _leaks(r.stdout + r.stderr) and not _leaks(caplog.text)


class _LeakyProvider(Provider):
    """A provider bug whose exception text carries its URL: the agent's catch-all must redact it."""

    name = label = "leaky-test"

    def complete(self, messages, tools) -> ModelStep:
        raise RuntimeError(f"request to http://{USER}:{PASSWORD}@10.0.0.1/v1 failed")


register_provider("leaky-test", _LeakyProvider)


def test_an_unexpected_provider_exception_is_redacted_too(tmp_path):
    result = Session.open(trace=False).ask("How do I configure SSO?", provider="leaky-test")
    assert result.record.status == "provider_error" and "RuntimeError" in result.record.error
    assert not _leaks(result.record.error)


def test_every_network_provider_reports_where_without_credentials():
    from workbench.providers import get_provider

    for wire in WIRES.values():
        p = get_provider(wire.provider, **wire.options(_with_userinfo("http://127.0.0.1:9")))
        assert not _leaks(p.where) and "127.0.0.1:9" in p.where
        assert not _leaks(repr(p))


@pytest.mark.parametrize("answer", ["raises", "error body", "bad body"])
def test_llamacpp_failures_never_show_its_loopback_servers_key(answer, tmp_path):
    """llama.cpp's in-process server has a random key (never printed, never traced): whatever llama.cpp
    raises or answers, the turn's error is scrubbed of it."""
    from workbench.agent import run_turn
    from workbench.providers.llamacpp import LlamaCppProvider, LoadedModel

    key = "loopback-key-Zq9wX2vB7nM4kL8"

    class FailingServer:  # stands in for xllamacpp.Server: the one call the provider makes
        def handle_chat_completions(self, request):
            if answer == "raises":
                raise RuntimeError(f"request refused (api key {key})")
            if answer == "error body":
                return {"error": {"type": "server_error", "message": f"slot failed, key={key}"}}
            return {"choices": [], "echo": key}

    provider = LlamaCppProvider(model=str(tmp_path / "m.gguf"))
    provider.loaded = lambda: LoadedModel(FailingServer(), str(tmp_path / "m.gguf"), 8192, 1, 0.0,  # room for the turn
                                          "http://127.0.0.1:9", key)
    record = run_turn("How do I configure SSO?", provider, Session.open(trace=False).toolbox, mode="excerpts", k=2)
    assert record.status == "provider_error" and record.error
    assert key not in record.error and key not in json.dumps(record.to_dict(), default=str)


TOKEN, SIG = "Tok3n-in-the-query-4242", "Sig-in-the-query-7777"


def _with_query(url: str) -> str:
    return f"{url}?access_token={TOKEN}&sig={SIG}&model_hint=small"


def _query_leaks(text: str) -> bool:
    return TOKEN in text or SIG in text


@pytest.mark.parametrize("text", [
    f"GET http://h/v1?access_token={TOKEN}&sig={SIG}", f"http://h/?token={TOKEN}", f"http://h/?key={TOKEN}",
    f"http://h/x?X-Amz-Signature={SIG}&X-Amz-Credential={TOKEN}", f"http://h/?apiKey={TOKEN}",
    f"http://h/?client_secret={TOKEN};sig={SIG}", f"url='http://h/?password={TOKEN}'",
])
def test_redact_removes_credential_query_parameters_and_keeps_the_rest(text):
    out = scrub_secrets(text)
    assert not _query_leaks(out) and "=[redacted]" in out


def test_ordinary_query_parameters_are_kept():
    text = "http://h/v1/models?page=2&max_tokens=5&design=a"
    assert scrub_secrets(text) == text


@both
@pytest.mark.parametrize("fault", ["server_error", "connection_error"])
def test_query_credentials_never_reach_errors_traces_or_the_export(wire, fault, tmp_path):
    """Before the fix `?access_token=` and `&sig=` of a server URL reached turns.error, runs.config_json and the
    Parquet export."""
    from workbench.cli import main

    db = empty_trace_db(tmp_path / "t.duckdb")
    session = Session.open(trace_db=db)
    if fault == "connection_error":
        result = session.ask("How do I configure SSO?", provider=wire.provider,
                             **wire.options(_with_query(refused_url()), retries=0))
    else:
        with ScriptedServer([wire.error(500, f"bad request for ?access_token={TOKEN}")], repeat_last=True) as srv:
            result = session.ask("How do I configure SSO?", provider=wire.provider,
                                 **wire.options(_with_query(srv.url), retries=0))
    assert result.record.status != "ok" and result.record.error
    assert not _query_leaks(result.record.error)
    assert not _query_leaks(json.dumps(result.payload.to_json()))
    assert not _query_leaks(json.dumps(result.record.to_dict(), default=str))
    con = duckdb.connect(str(db), read_only=True)
    stored = json.dumps(con.execute("SELECT t.error, r.config_json FROM turns t JOIN runs r USING (run_id)").fetchall())
    con.close()
    assert not _query_leaks(stored) and "access_token=[redacted]" in stored
    assert main(["export", "--parquet", str(tmp_path / "pq"), "--db", str(db)]) == 0
    exported = b"".join(p.read_bytes() for p in (tmp_path / "pq").rglob("*.parquet"))
    assert exported and TOKEN.encode() not in exported and SIG.encode() not in exported
