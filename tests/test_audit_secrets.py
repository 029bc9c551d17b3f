"""Secrets in an audited app's spans (issue 40, item 5): one redaction (`redact.redact_attributes`) is applied to
every span attribute as `collect` / `ingest` read it, so no secret reaches the trace store — its tables read with
SQL, and the Parquet export — and a replay (`verify --turn … --endpoint …`) sends none to the endpoint, even from a
store written before the redaction.

The attribute names are the ones the installed instrumentors write (`openinference.semconv`: the invocation
parameters, `metadata`, a document's metadata; `opentelemetry.semconv`: HTTP request headers), and the cases are the
ones the hostile run found stored as sent."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import duckdb
import pytest
from openinference.semconv.trace import DocumentAttributes, SpanAttributes
from opentelemetry.semconv.attributes.http_attributes import HTTP_REQUEST_HEADER_TEMPLATE

from clirun import cli
from test_audit_receiver import _answering_call
from test_replay_verify import ReplayServer
from workbench.redact import REDACTED, is_secret_name, redact_attributes, redact_value

BASIC = "Basic " + base64.b64encode(b"svc-user:Pa55-w0rd-basic").decode()
ANTHROPIC = "sk-ant-api03-Zx8Qm2Lp9Rt4Vw6Yb1Nc3Df5Gh7Jk0MnOpQrStUv"
OPENAI = "sk-proj-4f9Kq2Lm8Np3Rs6Tv1Wx5Yz7Ab0Cd"
AWS = "AKIAIOSFODNN7EXAMPLE"
HEADER_KEY = "hdr-key-51d2c0ffee9a"
META_TOKEN = "meta-token-77af3b2e"
JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJibyIsImV4cCI6MTcwMDAwMDAwMH0."
       "c2lnbmF0dXJlLW9mLXRoZS1qd3QtdG9rZW4")
URL_PASSWORD = "url-pa55word-9"
QUERY_KEY = "query-key-0a1b2c3d"
COOKIE = "sessionid=cookie-value-4d5e6f7a"
#: Every secret the spans below carry; none may be found anywhere after ingest.
SECRETS = (BASIC.split()[1], ANTHROPIC, OPENAI, AWS, HEADER_KEY, META_TOKEN, JWT, URL_PASSWORD, QUERY_KEY,
           "cookie-value-4d5e6f7a", "Pa55-w0rd-basic")
KB = "To rotate the payroll key, open Admin, then Keys, and press Rotate."
QUESTION = "How do I rotate the payroll key?"
ANSWER = "Open Admin, then Keys, and press Rotate [payroll](payroll)."
KB_MODEL = "m"  # the model `_answering_call` records


def _secret_attributes() -> dict[str, str | list[str]]:
    """The attributes the hostile run found stored as sent, under the names the instrumentors write."""
    header = HTTP_REQUEST_HEADER_TEMPLATE
    return {
        SpanAttributes.LLM_INVOCATION_PARAMETERS: json.dumps({
            "model": KB_MODEL, "temperature": 0, "max_tokens": 256, "api_key": OPENAI,
            "extra_headers": {"Authorization": BASIC, "X-Api-Key": HEADER_KEY}}),
        f"{header}.x-api-key": [HEADER_KEY],
        f"{header}.authorization": [f"Bearer {JWT}"],
        f"{header}.cookie": [COOKIE],
        "openai.api_key": OPENAI,
        "api_key": AWS,
        SpanAttributes.METADATA: json.dumps({"openai_api_key": OPENAI, "token": META_TOKEN, "tenant": "acme",
                                             "nested": [{"aws_secret_access_key": META_TOKEN}]}),
        "url.full": f"https://svc:{URL_PASSWORD}@api.example.com/v1/chat?api_key={QUERY_KEY}&stream=false",
    }


def _request(trace: str, user: str, tool_result: str, extra: dict | None = None) -> str:
    """One OTLP JSON request: a model call that answers after a tool call (`test_audit_receiver`), with `extra`
    attributes (a list is an array value)."""
    span = _answering_call(trace, trace[:16], tool_result, ANSWER, question=user)
    span["attributes"] += [{"key": k, "value": {"arrayValue": {"values": [{"stringValue": x} for x in v]}}
                            if isinstance(v, list) else {"stringValue": v}} for k, v in (extra or {}).items()]
    return json.dumps({"resourceSpans": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": "kb-bot"}}]}, "scopeSpans": [{"spans": [span]}]}]})


def _hits(extra: str = "") -> str:
    return json.dumps([{"doc_id": "payroll", "snippet": KB + extra,
                        DocumentAttributes.DOCUMENT_METADATA: json.dumps({"source": "kb", "access_token": META_TOKEN})}])


def _message_with_secrets() -> str:
    return (f"{QUESTION} My key is {ANTHROPIC} and the proxy wants `Proxy-Authorization: {BASIC}`; the AWS id is "
            f"{AWS}, the session {JWT}, and the API lives at "
            f"https://bo:{URL_PASSWORD}@api.example.com/v1?api_key={QUERY_KEY}.")


def _ingest(tmp_path: Path, lines: list[str], name: str = "kb-audit") -> Path:
    f = tmp_path / "spans.jsonl"
    f.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    db = tmp_path / "t.duckdb"
    r = cli("ingest", f, "--db", db, "--name", name)
    assert r.returncode == 0 and "turns written" in r.stderr, r.stderr
    return db


def _every_stored_text(db: Path) -> str:
    """Every value of every table of the trace store, as text (SQL over the file, as an analyst reads it)."""
    with duckdb.connect(str(db), read_only=True) as con:
        tables = [t for (t,) in con.execute("SELECT table_name FROM information_schema.tables "
                                            "WHERE table_schema = 'main' AND table_type = 'BASE TABLE'").fetchall()]
        return "\n".join(str(row) for t in tables for row in con.execute(f'SELECT * FROM "{t}"').fetchall())


def _every_parquet_text(folder: Path) -> str:
    with duckdb.connect() as con:
        return "\n".join(str(row) for f in sorted(folder.rglob("*.parquet"))
                         for row in con.execute("SELECT * FROM read_parquet(?)", [str(f)]).fetchall())


def _found(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


def test_no_secret_of_an_audited_span_is_stored_or_exported(tmp_path):
    db = _ingest(tmp_path, [_request("1" * 32, _message_with_secrets(), _hits(f" Admin token: {META_TOKEN}"),
                                     _secret_attributes())])
    stored = _every_stored_text(db)
    assert "payroll" in stored and "ChatCompletion" in stored  # the turn and its spans are there
    assert _found(stored) == [], "secrets stored as sent"
    with duckdb.connect(str(db), read_only=True) as con:
        [(span_json,)] = con.execute("SELECT span_json FROM audit_spans").fetchall()
        [(question,)] = con.execute("SELECT question FROM turns").fetchall()
    attrs = json.loads(span_json)["attributes"]
    params = json.loads(attrs[SpanAttributes.LLM_INVOCATION_PARAMETERS])
    assert params["api_key"] == REDACTED and params["extra_headers"] == {"Authorization": REDACTED,
                                                                         "X-Api-Key": REDACTED}
    assert params["max_tokens"] == 256 and params["model"] == KB_MODEL  # what is no secret is kept
    assert attrs[f"{HTTP_REQUEST_HEADER_TEMPLATE}.x-api-key"] == [REDACTED]
    assert attrs["openai.api_key"] == REDACTED and attrs["api_key"] == REDACTED
    assert json.loads(attrs[SpanAttributes.METADATA])["tenant"] == "acme"
    assert question.startswith(QUESTION) and REDACTED in question
    r = cli("export", "--parquet", tmp_path / "parquet", "--db", db)
    assert r.returncode == 0, r.stderr
    exported = _every_parquet_text(tmp_path / "parquet")
    assert "ChatCompletion" in exported and _found(exported) == [], "secrets in the Parquet export"


def test_a_span_without_secrets_is_stored_byte_for_byte(tmp_path):
    """The redaction rewrites only what holds a secret: a tool result's JSON text is kept as it was written (its
    spacing and escapes are what the audit and a replay match documents against)."""
    hits = '[{"doc_id":"payroll",  "snippet":"' + KB + '\\u00e9", "max_tokens": 3, "keywords": ["key", "token"]}]'
    request = _request("2" * 32, QUESTION, hits)
    db = _ingest(tmp_path, [request])
    with duckdb.connect(str(db), read_only=True) as con:
        [(span_json,)] = con.execute("SELECT span_json FROM audit_spans").fetchall()
    sent = json.loads(request)["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"]
    assert json.loads(span_json)["attributes"] == {a["key"]: a["value"]["stringValue"] for a in sent}


@pytest.mark.parametrize("name", ["api_key", "openai_api_key", "apiKey", "x-api-key", "X-API-KEY", "apikey", "token",
                                  "access_token", "x-auth-token", "secret", "client_secret", "password", "passwd",
                                  "authorization", "Proxy-Authorization", "cookie", "Set-Cookie", "access_key",
                                  "secret_access_key", "AWS_SECRET_ACCESS_KEY", "http.request.header.x-api-key",
                                  "openai.api_key", "http.request.header.authorization.0", "private_key"])
def test_names_of_secrets(name):
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["max_tokens", "llm.token_count.prompt", "gen_ai.usage.input_tokens", "keywords",
                                  "cache_key", "primary_key", "session.id", "input.value", "token_budget", "tokenizer",
                                  "llm.input_messages.0.message.content", "http.request.header.content-type"])
def test_names_that_are_no_secret(name):
    assert not is_secret_name(name)


@pytest.mark.parametrize("text", [
    f"key {ANTHROPIC} here", f"{OPENAI}", f"id {AWS}", "ASIAY34FZKBOKMUTVV7A", f"Authorization: {BASIC}",
    f"token {JWT}", f"Bearer {HEADER_KEY}", f"https://u:{URL_PASSWORD}@h/x", f"https://h/x?api_key={QUERY_KEY}",
    f"x-api-key: {HEADER_KEY}", f'{{"password": "{URL_PASSWORD}"}} and more'])
def test_secrets_by_their_shape_in_text(text):
    cleaned = redact_value(text)
    assert REDACTED in cleaned and _found(cleaned) == [] and "ASIAY34FZKBOKMUTVV7A" not in cleaned, cleaned


@pytest.mark.parametrize("text", ["basic understanding of SAML", "The Basic plan costs 10 EUR.", "sk-learn is a "
                                  "library", "see sk-learn-tutorial-for-beginners-and-experts", "Ask: how do I rotate keys?", "tokens: 12", "password: is required"])
def test_text_that_only_looks_like_a_secret_is_kept(text):
    assert redact_value(text) == text


def test_the_redaction_reaches_into_json_at_any_depth():
    attrs = redact_attributes({"metadata": {"a": [{"b": {"client_secret": "s3cr3t-value", "n": 1}}]},
                               "llm.invocation_parameters": json.dumps({"x": [json.dumps({"token": "abc"})]})})
    assert attrs["metadata"] == {"a": [{"b": {"client_secret": REDACTED, "n": 1}}]}
    assert json.loads(json.loads(attrs["llm.invocation_parameters"])["x"][0]) == {"token": REDACTED}


# --- replay: nothing secret is sent to the endpoint ------------------------------------------------------------

def _replay_db(tmp_path: Path) -> Path:
    user = f"{QUESTION} Use `Authorization: {BASIC}` and the key {ANTHROPIC} if you need them."
    return _ingest(tmp_path, [_request("3" * 32, user, _hits(), _secret_attributes())])


def _replayed(db: Path) -> list[bytes]:
    with ReplayServer(KB, ANSWER, "I do not know.", KB_MODEL) as server:
        r = cli("verify", "--turn", "otel-" + "3" * 32, "--endpoint", server.url + "/v1", "--db", db, "--json")
    assert r.returncode == 0, r.stderr
    assert server.requests and json.loads(r.stdout)["verification"]["verdicts"] == {"payroll": "load_bearing"}
    return [json.dumps(body).encode() for _, body in server.requests]


def test_a_replay_sends_no_secret(tmp_path):
    sent = _replayed(_replay_db(tmp_path))
    text = b"\n".join(sent).decode()
    assert QUESTION in text and _found(text) == [], "a secret was sent to the replay endpoint"


def test_a_replay_from_a_store_written_before_the_redaction_sends_no_secret(tmp_path):
    """A store whose spans still hold secrets (written before spans were redacted as they arrived): the replay
    redacts what it sends again."""
    db = _replay_db(tmp_path)
    with duckdb.connect(str(db)) as con:
        [(span_json,)] = con.execute("SELECT span_json FROM audit_spans").fetchall()
        span = json.loads(span_json)
        content = "llm.input_messages.0.message.content"
        span["attributes"][content] = span["attributes"][content].replace(
            f"Authorization: Basic {REDACTED}", f"Authorization: {BASIC}").replace(REDACTED, ANTHROPIC)
        assert BASIC in span["attributes"][content] and ANTHROPIC in span["attributes"][content]
        con.execute("UPDATE audit_spans SET span_json = ?", [json.dumps(span)])
    text = b"\n".join(_replayed(db)).decode()
    assert QUESTION in text and _found(text) == [], "a secret of an older store was sent to the replay endpoint"
