"""Replay verification of an audited turn (docs/design.md §9, §12; docs/audit.md): `verify --turn ID --endpoint URL`
re-sends the turn's final model call as its spans recorded it, unchanged (the control) and once per consulted
document with that document's text replaced by the withheld notice. The endpoint is a loopback server speaking the
OpenAI or Ollama wire format whose answer depends on whether one document's text is in the request: that document
is load-bearing, the other decorative, and the requests it received show exactly which text was withheld."""

from __future__ import annotations

import json
import threading

import duckdb
import pytest

from clirun import cli
from dbcopy import copy_db
from http_server import LoopbackServer, QuietHandler, send
from loopback import ollama_reply, openai_reply
from workbench.replay import LIMIT, REPLAY_METHOD
from workbench.verify import WITHHELD_NOTICE


class ReplayServer(LoopbackServer):
    """OpenAI chat completions (`POST /v1/chat/completions`) and Ollama (`POST /api/chat`): answers `with_it` when
    `needle` (as written, or as a JSON string writes it) is in the request's messages, else `without_it`; keeps every
    request's path and body. With `tool_at` that request (0: the first) is answered with a tool call instead."""

    def __init__(self, needle: str, with_it: str, without_it: str, model: str, tool_at: int | None = None):
        self.requests: list[tuple[str, dict]] = []
        lock, server = threading.Lock(), self
        forms = (needle, json.dumps(needle)[1:-1])

        class Handler(QuietHandler):
            def do_POST(self):
                body = self.json_body()
                with lock:
                    server.requests.append((self.path, body))
                    n = len(server.requests) - 1
                text = "\n".join(m.get("content") or "" for m in body.get("messages", ()))
                answer = with_it if any(f in text for f in forms) else without_it
                calls = [("lookup", {"q": "sso"})] if n == tool_at else []
                reply = ollama_reply(answer, calls, model=model) if self.path == "/api/chat" else \
                    openai_reply(None if calls else answer, calls, model=model)
                send(self, 200, json.dumps(reply.body).encode())

            def do_GET(self):
                send(self, 404, b'{"error": "not here"}')

        self._serve(Handler)

    def contents(self, i: int) -> list[str]:
        return [m.get("content") or "" for m in self.requests[i][1]["messages"]]


def _ablations(db) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT seq, doc_id, verdict, status, method FROM ablations ORDER BY verified_at, seq").fetchall()
    finally:
        con.close()


# --- a real audited turn: llama-index's CitationQueryEngine, spans through `collect` ----------------------------

ANSWER = "Enable SAML SSO in Admin settings under Security [1]."
LOST = "I could not find how single sign-on is configured; ask your administrator."


@pytest.fixture(scope="module")
def llama_turn(tmp_path_factory):
    """(db, turn, the load-bearing document's text, the decorative one's): the test_audit_instrumented app, its
    model this module's server (so the original answer is what the server answers with everything present)."""
    pytest.importorskip("openinference.instrumentation.llama_index")
    from audit_apps import DOCS, collect, llama_engine, llama_instrumented, tracer_provider, turns

    tmp = tmp_path_factory.mktemp("replay")
    corpus = tmp / "kb.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in DOCS), encoding="utf-8")
    needed = next(d for d in DOCS if d["id"] == "sso-setup")
    question = "How do I configure SSO single sign-on?"
    db = tmp / "t.duckdb"
    with ReplayServer(needed["text"], ANSWER, LOST, "loop-llama") as llm, \
            collect(db, "llama", "--corpus", str(corpus)) as url, llama_instrumented(tracer_provider(url, "kb-assistant")):
        retriever, engine = llama_engine(llm.url)
        scores = sorted((h.score for h in retriever.retrieve(question)), reverse=True)
        assert str(engine((scores[1] + scores[2]) / 2).query(question)) == ANSWER
        original = llm.contents(0)
    [turn] = turns(db, "--run", "llama")
    assert set(turn["sets"]["consulted"]) == {"sso-setup", "sso-okta"}  # both reached the model whole
    other = next(d for d in DOCS if d["id"] == "sso-okta")
    return db, turn, needed, other, original


@pytest.mark.parametrize("provider,path", [("openai", "/v1/chat/completions"), ("ollama", "/api/chat")])
def test_replay_verdicts_follow_what_the_endpoint_did(llama_turn, provider, path):
    db, turn, needed, other, original = llama_turn
    before = len(_ablations(db))
    with ReplayServer(needed["text"], ANSWER, LOST, "loop-llama") as server:
        endpoint = server.url.replace("://", "://me:s3cret-pw@") + ("/v1" if provider == "openai" else "")
        r = cli("verify", "--turn", turn["turn_id"], "--endpoint", endpoint, "--provider", provider, "--db", db)
    assert r.returncode == 0, r.stderr
    assert [p for p, _ in server.requests] == [path] * 3  # control, then one replay per consulted document
    assert all(body["model"] == "loop-llama" for _, body in server.requests)  # the recorded llm.model_name
    control, *replays = range(3)
    assert server.contents(control) == original  # the final call re-sent as recorded
    withheld = {}
    for i in replays:
        sent = server.contents(i)
        gone = [d for d in (needed, other) if not any(d["text"] in c for c in sent)]
        assert len(gone) == 1 and WITHHELD_NOTICE in "\n".join(sent)
        assert sent == [c.replace(gone[0]["text"], WITHHELD_NOTICE) for c in original]  # that text, nothing else
        withheld[i] = gone[0]["id"]
    rows = _ablations(db)[before:]
    assert [(s, d, v, st, m) for s, d, v, st, m in rows] == [
        (0, None, None, "ok", REPLAY_METHOD),
        *[(i, withheld[i], "load_bearing" if withheld[i] == "sso-setup" else "decorative", "ok", REPLAY_METHOD)
          for i in replays]]
    assert "load-bearing" in r.stdout and "decorative" in r.stdout and LIMIT in " ".join(r.stdout.split())
    assert "s3cret-pw" not in r.stdout + r.stderr and server.url in r.stdout  # credentials in the URL never shown


def test_replay_json_prints_the_payload_with_its_verification(llama_turn):
    db, turn, needed, _, _ = llama_turn
    with ReplayServer(needed["text"], ANSWER, LOST, "loop-llama") as server:
        r = cli("verify", "--turn", turn["turn_id"], "--endpoint", server.url + "/v1", "--db", db, "--json",
                "--budget", "2")
    assert r.returncode == 0, r.stderr
    v = json.loads(r.stdout)["verification"]
    assert v["method"] == REPLAY_METHOD and v["control_stable"] and v["budget"] == 2 and v["extra_calls"] == 2
    assert len(v["verdicts"]) == 1 and len(v["skipped"]) == 1  # one replay after the control, the other over budget


def test_a_control_that_differs_earns_no_verdict(llama_turn):
    db, turn, needed, _, _ = llama_turn
    with ReplayServer(needed["text"], "Something else entirely, about billing emails.", LOST, "loop-llama") as server:
        r = cli("verify", "--turn", turn["turn_id"], "--endpoint", server.url + "/v1", "--db", db, "--json")
    assert r.returncode == 0, r.stderr
    v = json.loads(r.stdout)["verification"]
    assert not v["control_stable"] and set(v["verdicts"].values()) == {"unstable"}
    assert len(server.requests) == 1  # no further calls spent


# --- audited turns from a file of OTLP JSON lines (`ingest`): tool results as JSON, and the refusals ------------

NEEDED = 'Open "Admin settings",\nthen Security → SAML.'  # a quote, a newline, non-ASCII: escaped in JSON
OTHER = "Okta: paste the SAML metadata URL."


def _span(trace: str, tool_output: str, answer: str, hidden: bool = False) -> dict:
    attrs = {"openinference.span.kind": "LLM", "llm.model_name": "file-model",
             "llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": "How do I do SSO?",
             "llm.input_messages.1.message.role": "assistant",
             "llm.input_messages.1.message.tool_calls.0.tool_call.id": "c1",
             "llm.input_messages.1.message.tool_calls.0.tool_call.function.name": "lookup",
             "llm.input_messages.1.message.tool_calls.0.tool_call.function.arguments": '{"q": "sso"}',
             "llm.input_messages.2.message.role": "tool", "llm.input_messages.2.message.tool_call_id": "c1",
             "llm.input_messages.2.message.content": "__REDACTED__" if hidden else tool_output,
             "llm.tools.0.tool.json_schema": json.dumps({"type": "function", "function": {
                 "name": "lookup", "description": "look it up", "parameters": {"type": "object", "properties": {}}}}),
             "llm.output_messages.0.message.role": "assistant", "llm.output_messages.0.message.content": answer}
    return {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "app"}}]},
                               "scopeSpans": [{"spans": [{
                                   "traceId": trace, "spanId": trace[:16], "name": "ChatCompletion",
                                   "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000001000000000",
                                   "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()]}]}]}]}


HITS = json.dumps([{"doc_id": "setup", "snippet": NEEDED}, {"doc_id": "okta", "snippet": OTHER}])
FILE_ANSWER = "Open Admin settings, then Security and SAML: see [setup](setup) and [okta](okta)."
TRACES = {"both": ("1" * 32, HITS, FILE_ANSWER, False),
          "hidden": ("2" * 32, HITS, FILE_ANSWER, True),
          "titles": ("3" * 32, json.dumps([{"doc_id": "setup", "title": "SSO setup"}]), "I do not know.", False)}


@pytest.fixture(scope="module")
def ingested_once(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ingested")
    f = tmp / "spans.jsonl"
    f.write_text("".join(json.dumps(_span(*t)) + "\n" for t in TRACES.values()), encoding="utf-8")
    db = tmp / "t.duckdb"
    r = cli("ingest", f, "--db", db, "--name", "file")
    assert r.returncode == 0 and "3 turns written" in r.stderr, r.stderr
    return db


@pytest.fixture
def ingested(ingested_once, tmp_path):
    """The three ingested turns, in a database of this test's own (a copy: a test's verification writes to it)."""
    return copy_db(ingested_once, tmp_path / "t.duckdb")


def test_a_json_tool_result_loses_exactly_that_documents_snippet(ingested):
    with ReplayServer(NEEDED, FILE_ANSWER, LOST, "file-model") as server:
        r = cli("verify", "--turn", "otel-" + "1" * 32, "--endpoint", server.url + "/v1", "--db", ingested, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["verification"]["verdicts"] == {"setup": "load_bearing", "okta": "decorative"}
    tool = [next(m for m in body["messages"] if m["role"] == "tool")["content"] for _, body in server.requests]
    assert tool[0] == HITS  # the control: the tool result as recorded
    assert json.loads(tool[1]) == [{"doc_id": "setup", "snippet": WITHHELD_NOTICE}, {"doc_id": "okta", "snippet": OTHER}]
    assert json.loads(tool[2]) == [{"doc_id": "setup", "snippet": NEEDED}, {"doc_id": "okta", "snippet": WITHHELD_NOTICE}]
    assert server.requests[0][1]["tools"][0]["function"]["name"] == "lookup"  # the recorded tool declarations


@pytest.mark.parametrize("turn,message", [
    ("otel-" + "9" * 32, "no turn"),
    ("otel-" + "2" * 32, "unauditable"),
    ("otel-" + "3" * 32, "nothing to ablate"),
])
def test_turns_that_cannot_be_replayed_are_refused_and_nothing_is_written(ingested, turn, message):
    with ReplayServer(NEEDED, FILE_ANSWER, LOST, "file-model") as server:
        r = cli("verify", "--turn", turn, "--endpoint", server.url + "/v1", "--db", ingested)
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert server.requests == [] and _ablations(ingested) == []


def test_a_native_turn_is_sent_to_the_normal_verification(tmp_path):
    db = tmp_path / "t.duckdb"
    asked = cli("ask", "How do I configure SSO?", "--json", "--db", db)
    assert asked.returncode == 0, asked.stderr
    r = cli("verify", "--turn", json.loads(asked.stdout)["turn_id"], "--endpoint", "http://127.0.0.1:9/v1", "--db", db)
    assert r.returncode == 2 and "not audited" in r.stderr and "ask --verify" in r.stderr, r.stderr
    assert _ablations(db) == []


@pytest.mark.parametrize("provider", ["openai", "ollama"])
def test_an_unreachable_endpoint_is_an_error_and_nothing_is_written(ingested, provider):
    with ReplayServer(NEEDED, FILE_ANSWER, LOST, "file-model") as server:
        dead = server.url  # a port nothing listens on once the server is closed
    r = cli("verify", "--turn", "otel-" + "1" * 32, "--endpoint", dead + ("/v1" if provider == "openai" else ""),
            "--provider", provider, "--db", ingested)
    assert r.returncode == 2 and "cannot replay" in r.stderr, r.stderr
    assert _ablations(ingested) == []


class RedirectServer(LoopbackServer):
    """Answers every request with `code` and a Location on another host; keeps the paths it was asked."""

    def __init__(self, code: int, location: str):
        self.paths: list[str] = []
        server = self

        class Handler(QuietHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                server.paths.append(self.path)
                send(self, code, b"", headers={"Location": location})

            do_GET = do_POST

        self._serve(Handler)


@pytest.mark.parametrize("provider,code", [("openai", 302), ("openai", 307), ("ollama", 302), ("ollama", 308)])
def test_a_redirecting_endpoint_is_reported_as_a_redirect_and_nothing_is_written(ingested, provider, code):
    """Issue 40, item 8: a redirect is never followed, and it is told as one (its code and where it pointed), not
    as an endpoint that cannot be reached; no verification is written."""
    with RedirectServer(code, "http://elsewhere.example:8080/v1/chat/completions") as server:
        r = cli("verify", "--turn", "otel-" + "1" * 32, "--endpoint", server.url + ("/v1" if provider == "openai" else ""),
                "--provider", provider, "--db", ingested)
    assert server.paths, "the endpoint was asked"
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"answered {code}, a redirect" in r.stderr and "elsewhere.example:8080" in r.stderr, r.stderr
    assert "cannot connect" not in r.stderr
    assert _ablations(ingested) == []


@pytest.mark.parametrize("provider", ["openai", "ollama"])
def test_a_credential_in_the_endpoints_query_is_never_printed(ingested, provider):
    """Issue 40, item 8: `verify --endpoint 'http://…/v1?api_key=…'` prints the endpoint without the credential,
    when it answers and when it cannot be reached."""
    secret = "q-api-key-5e6f7a8b9c"
    with ReplayServer(NEEDED, FILE_ANSWER, LOST, "file-model") as server:
        base = server.url + ("/v1" if provider == "openai" else "")
        r = cli("verify", "--turn", "otel-" + "1" * 32, "--endpoint", f"{base}?api_key={secret}", "--provider",
                provider, "--db", ingested)
    assert server.requests and r.returncode == 0, r.stderr
    assert f"replayed at {base}?api_key=[redacted]" in r.stdout
    with ReplayServer(NEEDED, FILE_ANSWER, LOST, "file-model") as closed:
        nobody = closed.url + ("/v1" if provider == "openai" else "")  # a port nothing listens on once it is closed
    dead = cli("verify", "--turn", "otel-" + "1" * 32, "--endpoint", f"{nobody}?api_key={secret}", "--provider",
               provider, "--db", ingested)
    assert dead.returncode == 2 and "cannot replay" in dead.stderr, dead.stderr
    assert secret not in r.stdout + r.stderr + dead.stdout + dead.stderr


def _llm(trace: str, span: str, start: int, tool_output: str, out: dict[str, str]) -> dict:
    attrs = {"openinference.span.kind": "LLM", "llm.model_name": "file-model",
             "llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": "How do I do SSO?",
             "llm.input_messages.1.message.role": "assistant",
             "llm.input_messages.1.message.tool_calls.0.tool_call.id": span,
             "llm.input_messages.1.message.tool_calls.0.tool_call.function.name": "lookup",
             "llm.input_messages.2.message.role": "tool", "llm.input_messages.2.message.tool_call_id": span,
             "llm.input_messages.2.message.content": tool_output,
             **{f"llm.output_messages.0.message.{k}": v for k, v in out.items()}}
    return {"traceId": trace, "spanId": span, "parentSpanId": "a" * 16, "name": "ChatCompletion",
            "startTimeUnixNano": str(start), "endTimeUnixNano": str(start + 10),
            "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()]}


def test_a_document_only_an_earlier_model_call_read_gets_no_verdict(tmp_path):
    """The app's first model call read `early`; its final call was sent only `late` (the app dropped the first
    result): a replay of the final call cannot withhold `early`, and says so instead of calling it decorative."""
    trace = "4" * 32
    first = _llm(trace, "b" * 16, 1_700_000_000_000_000_100, json.dumps([{"doc_id": "early", "snippet": OTHER}]),
                 {"role": "assistant", "tool_calls.0.tool_call.id": "x",
                  "tool_calls.0.tool_call.function.name": "lookup"})
    answer = "Open Admin settings, then Security and SAML: see [late](late) and [early](early)."
    final = _llm(trace, "c" * 16, 1_700_000_000_000_000_200, json.dumps([{"doc_id": "late", "snippet": NEEDED}]),
                 {"role": "assistant", "content": answer})
    root = {"traceId": trace, "spanId": "a" * 16, "name": "app", "startTimeUnixNano": "1700000000000000000",
            "endTimeUnixNano": "1700000001000000000",
            "attributes": [{"key": "openinference.span.kind", "value": {"stringValue": "CHAIN"}}]}
    f = tmp_path / "spans.jsonl"
    f.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [root, first, final]}]}]}) + "\n",
                 encoding="utf-8")
    db = tmp_path / "t.duckdb"
    assert cli("ingest", f, "--db", db).returncode == 0
    with ReplayServer(NEEDED, answer, LOST, "file-model") as server:
        r = cli("verify", "--turn", "otel-" + trace, "--endpoint", server.url + "/v1", "--db", db, "--json")
    assert r.returncode == 0, r.stderr
    v = json.loads(r.stdout)["verification"]
    assert v["verdicts"] == {"late": "load_bearing"} and v["extra_turns"] == 2 and len(server.requests) == 2
    assert v["details"]["early"]["status"] == "not_withheld"
    assert "not in the final model call's input" in v["details"]["early"]["reason"]
    assert [row[1:4] for row in _ablations(db)] == [(None, None, "ok"), ("late", "load_bearing", "ok"),
                                                    ("early", None, "not_withheld")]


def test_a_replay_that_asks_for_a_tool_earns_no_verdict(ingested):
    """Tool calls are not re-run: a replay answered with one is a failed re-run (no verdict), not an answer."""
    with ReplayServer(NEEDED, FILE_ANSWER, LOST, "file-model", tool_at=1) as server:  # the first replay asks
        r = cli("verify", "--turn", "otel-" + "1" * 32, "--endpoint", server.url + "/v1", "--db", ingested, "--json")
    assert r.returncode == 0, r.stderr
    v = json.loads(r.stdout)["verification"]
    [failed] = v["failed"]
    assert v["details"][failed]["status"] == "tool_call" and "not re-run" in v["details"][failed]["reason"]
    assert failed not in v["verdicts"] and len(v["verdicts"]) == 1
