"""The OTLP/HTTP receiver of `collect` under bad input (docs/security.md): a malformed body, a span without ids,
a body over the bound, a 10 MB attribute, non-JSON tool output, a span sent twice; `ingest FILE`, and `ingest
--phoenix` from a server that is no Phoenix or none at all (tests/test_phoenix.py reads a real one)."""

from __future__ import annotations

import gzip
import json
import socket
import threading
import urllib.error
import urllib.request

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from clirun import cli
from http_server import LoopbackServer, QuietHandler, send
from tracedb import empty_trace_db
from workbench.audit.collector import Assembler, make_server
from workbench.audit.spans import MAX_BODY_BYTES
from workbench.audit.units import Resolver
from workbench.trace.payloads import stored_payloads
from workbench.trace.writer import TraceWriter

TRACE = "5b8efff798038103d269b633813fc60c"


def _request(spans: list[dict], service: str = "app") -> ExportTraceServiceRequest:
    """An OTLP request (the spans as OTLP JSON objects: hex ids, attributes as key/value)."""
    data = {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
                               "scopeSpans": [{"spans": spans}]}]}
    return data


def _attrs(**values) -> list[dict]:
    return [{"key": k.replace("__", "."), "value": {"stringValue": v} if isinstance(v, str) else {"intValue": v}}
            for k, v in values.items()]


def _answering_call(trace: str, span: str, tool_output: str, answer: str, parent: str | None = None,
                    question: str = "How do I do SSO?") -> dict:
    attrs = {"openinference.span.kind": "LLM", "llm.model_name": "m",
             "llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": question,
             "llm.input_messages.1.message.role": "assistant",
             "llm.input_messages.1.message.tool_calls.0.tool_call.id": "c1",
             "llm.input_messages.1.message.tool_calls.0.tool_call.function.name": "lookup",
             "llm.input_messages.2.message.role": "tool", "llm.input_messages.2.message.tool_call_id": "c1",
             "llm.input_messages.2.message.content": tool_output,
             "llm.output_messages.0.message.role": "assistant", "llm.output_messages.0.message.content": answer}
    span_obj = {"traceId": trace, "spanId": span, "name": "ChatCompletion", "startTimeUnixNano": "1700000000000000000",
                "endTimeUnixNano": "1700000001000000000",
                "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()]}
    if parent:
        span_obj["parentSpanId"] = parent
    return span_obj


@pytest.fixture
def receiver(tmp_path):
    writer = TraceWriter(empty_trace_db(tmp_path / "t.duckdb"))
    a = Assembler(writer, Resolver(), name="rx")
    server = make_server(a, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield a, f"http://127.0.0.1:{server.server_address[1]}/v1/traces", tmp_path / "t.duckdb"
    server.shutdown()
    server.server_close()


def _post(url: str, body: bytes, content_type: str = "application/json", encoding: str | None = None):
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": content_type,
                                                                        **({"Content-Encoding": encoding} if encoding else {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _payloads(db):
    return [json.loads(p) for p in stored_payloads(db)]


def test_bad_bodies_get_a_clear_400_and_the_receiver_keeps_working(receiver):
    a, url, db = receiver
    status, body = _post(url, b"{not json")
    assert status == 400 and b"not JSON" in body
    status, body = _post(url, b"\x0a\xff\xff\xff", "application/x-protobuf")
    assert status == 400 and b"protobuf" in body
    no_ids = _answering_call(TRACE, "00f067aa0ba902b7", "{}", "ok")
    del no_ids["spanId"]
    status, body = _post(url, json.dumps(_request([no_ids])).encode())
    assert status == 400 and b"span_id" in body
    status, body = _post(url, b"x", "text/plain")
    assert status == 400 and b"Content-Type" in body
    good = json.dumps(_request([_answering_call(TRACE, "00f067aa0ba902b7", '[{"doc_id": "sso", "snippet": "Open SSO"}]',
                                                "See [sso](sso).")])).encode()
    assert _post(url, gzip.compress(good), encoding="gzip")[0] == 200  # gzip JSON
    [turn] = _payloads(db)
    assert turn["sets"]["consulted"] == ["sso"]


def test_protobuf_and_a_span_sent_twice_make_one_turn(receiver):
    a, url, db = receiver
    msg = json_format.ParseDict(_request([]), ExportTraceServiceRequest())
    data = _request([_answering_call(TRACE, "00f067aa0ba902b7", '[{"doc_id": "sso", "snippet": "Open SSO"}]', "Done.")])
    span = data["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    pb = msg.resource_spans[0].scope_spans[0].spans.add()
    pb.trace_id, pb.span_id, pb.name = bytes.fromhex(TRACE), bytes.fromhex(span["spanId"]), span["name"]
    pb.start_time_unix_nano, pb.end_time_unix_nano = 1, 2
    for kv in span["attributes"]:
        pb.attributes.add(key=kv["key"]).value.string_value = kv["value"]["stringValue"]
    for _ in range(2):  # an exporter's retry
        assert _post(url, msg.SerializeToString(), "application/x-protobuf") == (200, b"")
    assert len(_payloads(db)) == 1
    assert a.spans == 2 and a.turns == 1


def test_over_the_size_bound_is_413(receiver):
    a, url, db = receiver
    status, body = _post(url, b" " * (MAX_BODY_BYTES + 1))
    assert status == 413 and str(MAX_BODY_BYTES).encode() in body
    bomb = gzip.compress(b" " * (MAX_BODY_BYTES + 10))
    status, body = _post(url, bomb, encoding="gzip")
    assert status == 413 and b"inflates" in body


def test_a_gzip_body_of_several_members_is_read_whole_and_still_bounded(receiver):
    """Issue 40, item 8: gzip members one after the other (as `cat a.gz b.gz` or a streaming compressor writes them)
    are one body; members that together inflate over the bound are refused as one bomb is."""
    a, url, db = receiver
    good = json.dumps(_request([_answering_call(TRACE, "00f067aa0ba902b7", '[{"doc_id": "sso", "snippet": "Open SSO"}]',
                                                "See [sso](sso).")])).encode()
    half = len(good) // 2
    assert _post(url, gzip.compress(good[:half]) + gzip.compress(good[half:]), encoding="gzip")[0] == 200
    [turn] = _payloads(db)
    assert turn["sets"]["consulted"] == ["sso"]
    member = gzip.compress(b" " * (MAX_BODY_BYTES // 4 + 1))
    status, body = _post(url, member * 4, encoding="gzip")
    assert status == 413 and b"inflates" in body
    status, body = _post(url, gzip.compress(good)[:-12], encoding="gzip")  # cut inside its compressed stream
    assert status == 400 and b"gzip" in body


def test_a_10_mb_attribute_makes_an_unauditable_turn_and_others_survive(receiver):
    a, url, db = receiver
    huge = _answering_call(TRACE, "00f067aa0ba902b7", "x" * 10_000_000, "Done.")
    assert _post(url, json.dumps(_request([huge])).encode())[0] == 200
    other = _answering_call("6b8efff798038103d269b633813fc60c", "10f067aa0ba902b7", "plain text, not JSON", "Done.")
    assert _post(url, json.dumps(_request([other])).encode())[0] == 200
    cut, plain = _payloads(db)
    assert cut["status"] == "unauditable" and "size bound" in cut["audit"]["reason"]
    assert cut["sets"]["consulted"] == []
    # non-JSON tool output is one unit: the result itself, shown as a snippet, uncited so not consulted
    assert plain["status"] == "ok" and len(plain["sets"]["retrieved"]) == 1 and plain["sets"]["consulted"] == []


def test_ingest_a_file_of_otlp_json_lines(tmp_path):
    f = tmp_path / "spans.jsonl"
    traces = [_request([_answering_call(f"{i:032x}", f"{i:016x}", json.dumps([{"doc_id": "sso", "snippet": "Open SSO"}]),
                                        "See [sso](sso).")]) for i in range(1, 4)]
    f.write_text("".join(json.dumps(t) + "\n" for t in traces), encoding="utf-8")
    db = empty_trace_db(tmp_path / "t.duckdb")
    r = cli("ingest", str(f), "--db", str(db), "--name", "file")
    assert r.returncode == 0, r.stderr
    assert "3 turns written" in r.stderr
    r = cli("turns", "--json", "--db", str(db), "--run", "file")
    assert [json.loads(line)["sets"]["consulted"] for line in r.stdout.splitlines()] == [["sso"]] * 3
    again = cli("ingest", str(f), "--db", str(db), "--name", "again")
    assert again.returncode == 0 and "0 turns written, 3 already stored" in again.stderr
    assert cli("turns", "--json", "--db", str(db), "--run", "again").stdout == ""
    f.write_text("{bad\n", encoding="utf-8")
    r = cli("ingest", str(f), "--db", str(db))
    assert r.returncode == 2 and "spans.jsonl:1" in r.stderr


class _NotPhoenix(LoopbackServer):
    """A web server that is no Phoenix: every GET gets `status` and `body`."""

    def __init__(self, status: int, body: bytes, content_type: str):
        class Handler(QuietHandler):
            def do_GET(self):
                send(self, status, body, content_type)

        self._serve(Handler)


@pytest.mark.parametrize("status, body, content_type, says", [
    (200, b"<html><body>Welcome</body></html>", "text/html", "does not answer as a Phoenix server (JSONDecodeError"),
    (404, b'{"detail": "Not Found"}', "application/json", "does not answer as a Phoenix server (GET /v1/projects: HTTP 404)"),
    (401, b'{"detail": "Unauthorized"}', "application/json", "refused access (HTTP 401)"),
])
def test_ingest_from_a_server_that_is_no_phoenix_exits_2_writing_nothing(tmp_path, status, body, content_type, says):
    db = tmp_path / "t.duckdb"
    with _NotPhoenix(status, body, content_type) as server:
        r = cli("ingest", "--phoenix", server.url, "--project", "app", "--db", str(db))
    assert r.returncode == 2 and says in r.stderr and server.url in r.stderr and "Traceback" not in r.stderr
    assert not db.exists()


def test_ingest_from_an_unreachable_phoenix_and_bad_options_exit_2(tmp_path):
    db = tmp_path / "t.duckdb"
    with socket.socket() as s:  # a port nothing listens on once it is closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = cli("ingest", "--phoenix", f"http://127.0.0.1:{port}", "--project", "app", "--db", str(db))
    assert r.returncode == 2 and f"cannot reach Phoenix at http://127.0.0.1:{port}" in r.stderr
    r = cli("ingest", "--phoenix", "not a url", "--project", "app", "--db", str(db))
    assert r.returncode == 2 and "cannot reach Phoenix at not a url" in r.stderr
    for args, says in [((), "one of the two"), (("spans.jsonl", "--phoenix", "http://127.0.0.1:6006", "--project", "a"),
                                                "one of the two"),
                       (("--phoenix", "http://127.0.0.1:6006"), "go together"), (("x.jsonl", "--project", "a"), "go together")]:
        r = cli("ingest", *args, "--db", str(db))
        assert r.returncode == 2 and says in r.stderr, (args, r.stderr)
    assert not db.exists()


def test_sigterm_assembles_a_trace_whose_root_never_came(tmp_path):
    from audit_apps import collect, turns

    db = empty_trace_db(tmp_path / "t.duckdb")
    orphan = _answering_call(TRACE, "00f067aa0ba902b7", '[{"doc_id": "sso", "snippet": "Open SSO"}]', "See [sso](sso).",
                             parent="1111111111111111")  # its root span was never exported
    with collect(db, "cut-short") as url:
        assert _post(url, json.dumps(_request([orphan])).encode())[0] == 200
    [turn] = turns(db, "--run", "cut-short")  # written on SIGTERM, and collect exited 0
    assert turn["sets"]["consulted"] == ["sso"]


def test_turns_prints_native_turns_too(tmp_path):
    db = empty_trace_db(tmp_path / "t.duckdb")
    asked = cli("ask", "How do I configure SSO?", "--json", "--db", str(db))
    assert asked.returncode == 0, asked.stderr
    r = cli("turns", "--json", "--db", str(db))
    assert [json.loads(line) for line in r.stdout.splitlines()] == [json.loads(asked.stdout)]


def test_audited_turns_are_in_the_usage_and_gap_views(tmp_path):
    from workbench.trace.reader import TraceReader

    f = tmp_path / "spans.jsonl"
    read = _request([_answering_call(f"{1:032x}", f"{1:016x}", json.dumps([{"doc_id": "sso", "snippet": "Open SSO"}]),
                                     "See [sso](sso).")])
    gap = _request([_answering_call(f"{2:032x}", f"{2:016x}", json.dumps([{"doc_id": "billing", "snippet": "Invoices"}]),
                                    "I could not find it.", question="How do I export invoices as CSV?")])
    f.write_text(json.dumps(read) + "\n" + json.dumps(gap) + "\n", encoding="utf-8")
    db = empty_trace_db(tmp_path / "t.duckdb")
    assert cli("ingest", str(f), "--db", str(db)).returncode == 0
    reader = TraceReader(db)
    _, usage = reader.rows("SELECT doc_id, retrieved_turns, consulted_turns FROM doc_usage ORDER BY doc_id")
    assert usage == [("billing", 1, 0), ("sso", 1, 1)]
    _, gaps = reader.rows("SELECT last_turn_id FROM doc_gaps")
    assert gaps == [(f"otel-{2:032x}",)]


def test_memory_stays_bounded_while_roots_are_missing(tmp_path):
    from workbench.audit.spans import parse_request

    a = Assembler(TraceWriter(empty_trace_db(tmp_path / "t.duckdb")), Resolver(), name="bounded", max_pending=1)
    for i in (1, 2):
        orphan = _answering_call(f"{i:032x}", f"{i:016x}", '[{"doc_id": "sso", "snippet": "Open SSO"}]', "Done.",
                                 parent="1111111111111111")
        a.receive(parse_request(json.dumps(_request([orphan])).encode(), "application/json"))
    assert (a.turns, a.n_pending) == (1, 1)  # the older trace was assembled as it was, to stay within the bound
    assert a.finish() == 2


def _in_session(span: dict, session: str, start_s: int) -> dict:
    span["attributes"].append({"key": "session.id", "value": {"stringValue": session}})
    span["startTimeUnixNano"], span["endTimeUnixNano"] = f"{start_s}000000000", f"{start_s + 1}000000000"
    return span


def test_ingest_questions_scores_only_the_turns_it_matched(tmp_path):
    """A turn no line matched stays unscored, even when its question is a line's text: a follow-up of a session the
    file does not name is no answer to the file's conversation (m023 leaves audit runs out of m021's fallback)."""
    sso = json.dumps([{"doc_id": "sso", "snippet": "Open SSO"}])
    chats = [("s1", "How do I do SSO?"), ("s2", "Hello?"), ("s2", "And with Okta?")]
    f = tmp_path / "spans.jsonl"
    f.write_text("".join(json.dumps(_request([_in_session(_answering_call(f"{i:032x}", f"{i:016x}", sso, "See [sso](sso).",
                                                                          question=q), s, 1700000000 + 10 * i)])) + "\n"
                         for i, (s, q) in enumerate(chats, start=1)), encoding="utf-8")
    q = tmp_path / "chat.jsonl"
    q.write_text(json.dumps({"question": "How do I do SSO?", "conversation": "s1", "expected": ["sso"]}) + "\n"
                 + json.dumps({"question": "And with Okta?", "conversation": "s1", "expected": ["sso"]}) + "\n",
                 encoding="utf-8")
    db = empty_trace_db(tmp_path / "t.duckdb")
    r = cli("ingest", str(f), "--db", str(db), "--name", "chat", "--questions", str(q), "--verbose")
    assert r.returncode == 0, r.stderr
    assert "1 of 2 questions passed" in r.stdout
    assert "chat.jsonl:2: 'And with Okta?' (conversation 's1')" in r.stderr
    assert "2 turns no question matched" in r.stderr and "'Hello?' (session 's2')" in r.stderr  # --verbose
    shown = json.loads(cli("runs", "show", "chat", "--db", str(db), "--json").stdout)
    assert [(x["line"], x["answered"], x["passed"]) for x in shown["question_rows"]] == [(1, True, True), (2, False, False)]


def test_ingest_questions_refuses_a_taken_name_before_writing(tmp_path):
    f = tmp_path / "spans.jsonl"
    f.write_text(json.dumps(_request([_answering_call(TRACE, "00f067aa0ba902b7", "[]", "Hi.")])) + "\n", encoding="utf-8")
    q = tmp_path / "q.jsonl"
    q.write_text('{"question": "How do I do SSO?", "expected": ["sso"]}\n', encoding="utf-8")
    db = empty_trace_db(tmp_path / "t.duckdb")
    assert cli("ingest", str(f), "--db", str(db), "--name", "a", "--questions", str(q)).returncode == 0
    r = cli("ingest", str(f), "--db", str(db), "--name", "a", "--questions", str(q))
    assert r.returncode == 2 and "already taken" in r.stderr
    r = cli("ingest", str(f), "--db", str(db), "--baseline", "a")
    assert r.returncode == 2 and "--baseline needs --questions" in r.stderr


def test_an_openllmetry_app_bare_client_gives_a_turn_per_answering_call_grouped_by_its_conversation(receiver):
    """OpenLLMetry's `opentelemetry-instrumentation-openai` (the OTel GenAI conventions, no OpenInference kind): each
    model call is its own trace; the answering one is the turn, its input holding the tool step before it."""
    a, url, db = receiver
    hits = json.dumps([{"url": "https://kb.example/sso", "title": "SSO", "text": "Open Settings then SSO."}])
    asking = {"llm.request.type": "chat", "gen_ai.system": "openai", "gen_ai.request.model": "gpt-x",
              "gen_ai.conversation.id": "conv-1", "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "SSO?",
              "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.tool_calls.0.id": "call_1",
              "gen_ai.completion.0.tool_calls.0.name": "search", "gen_ai.completion.0.tool_calls.0.arguments": '{"q": "sso"}'}
    answering = {"llm.request.type": "chat", "gen_ai.system": "openai", "gen_ai.request.model": "gpt-x",
                 "gen_ai.conversation.id": "conv-1", "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "SSO?",
                 "gen_ai.prompt.1.role": "assistant", "gen_ai.prompt.1.tool_calls.0.id": "call_1",
                 "gen_ai.prompt.1.tool_calls.0.name": "search", "gen_ai.prompt.1.tool_calls.0.arguments": '{"q": "sso"}',
                 "gen_ai.prompt.2.role": "tool", "gen_ai.prompt.2.tool_call_id": "call_1", "gen_ai.prompt.2.content": hits,
                 "gen_ai.completion.0.role": "assistant",
                 "gen_ai.completion.0.content": "Open Settings ([SSO](https://kb.example/sso))."}
    spans = [{"traceId": trace, "spanId": "00f067aa0ba902b7", "name": "openai.chat",
              "startTimeUnixNano": str(1700000000000000000 + i), "endTimeUnixNano": str(1700000000000000001 + i),
              "attributes": _attrs(**{k.replace(".", "__"): v for k, v in attrs.items()})}
             for i, (trace, attrs) in enumerate([(TRACE, asking), ("6b8efff798038103d269b633813fc60c", answering)])]
    assert _post(url, json.dumps(_request(spans, service="openllmetry-app")).encode())[0] == 200
    [turn] = _payloads(db)
    assert turn["sets"] == {"retrieved": ["https://kb.example/sso"], "cited": ["https://kb.example/sso"],
                            "consulted": ["https://kb.example/sso"]}
    assert [(c["name"], c["args"]) for c in turn["tool_calls"]] == [("search", {"q": "sso"})]
    assert turn["conversation_id"] == "otel/openllmetry-app/conv-1" and turn["config"]["model"] == "gpt-x"
    assert len(turn["audit"]["trace_ids"]) == 2


def test_messages_sent_as_genai_span_events_are_read(receiver):
    """An SDK that records the prompt and completion as span events (`gen_ai.content.prompt` / `.completion`)."""
    a, url, db = receiver
    prompt = json.dumps([{"role": "user", "content": "SSO?"},
                         {"role": "tool", "tool_call_id": "c1",
                          "content": json.dumps([{"url": "https://kb.example/sso", "text": "Open Settings then SSO."}])}])
    completion = json.dumps([{"role": "assistant", "content": "See [SSO](https://kb.example/sso)."}])
    span_obj = {"traceId": TRACE, "spanId": "00f067aa0ba902b7", "name": "chat gpt-x", "startTimeUnixNano": "1",
                "endTimeUnixNano": "2", "attributes": _attrs(gen_ai__operation__name="chat"),
                "events": [{"name": "gen_ai.content.prompt", "timeUnixNano": "1",
                            "attributes": [{"key": "gen_ai.prompt", "value": {"stringValue": prompt}}]},
                           {"name": "gen_ai.content.completion", "timeUnixNano": "2",
                            "attributes": [{"key": "gen_ai.completion", "value": {"stringValue": completion}}]}]}
    assert _post(url, json.dumps(_request([span_obj])).encode())[0] == 200
    [turn] = _payloads(db)
    assert turn["sets"]["consulted"] == ["https://kb.example/sso"] and turn["rejected_citations"] == []
