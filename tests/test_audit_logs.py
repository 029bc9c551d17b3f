"""GenAI log events (docs/audit.md "GenAI log events", workbench/audit/logs.py): a model call whose messages come only
as OTLP log records to `collect`'s /v1/logs, joined to its span by trace and span id, in either order, within the
waiting rule's bound; both event forms (the per-message `gen_ai.user.message` … `gen_ai.choice`, and one
`gen_ai.client.inference.operation.details` record); protobuf, JSON and gzip; secrets redacted; a record over the size
bound; late records; `ingest` of a file that holds both. The real instrumentor's cell is in
tests/test_audit_conformance.py (`otel_openai_v2`)."""

from __future__ import annotations

import copy
import gzip
import io
import json
import threading
import time

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from clirun import cli
from test_audit_receiver import _payloads, _post
from workbench.audit import collector, logs
from workbench.audit.collector import Assembler, make_server
from workbench.audit.spans import MAX_ATTRIBUTE_CHARS, Span, _logs_json, _parse_json as _trace_json
from workbench.audit.units import Resolver
from workbench.commands._audit import report
from workbench.trace.writer import TraceWriter

TRACE, CALL = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
QUESTION = "How do I set up SSO?"
HITS = '[{"doc_id": "sso", "url": "https://help.example.com/sso", "snippet": "Open Admin settings and enable SAML"}]'
ANSWER = "Enable SAML: see [SSO](https://help.example.com/sso)."
SECRET = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0" * 2


def any_value(v) -> dict:
    """A Python value as an OTLP JSON AnyValue."""
    if isinstance(v, str):
        return {"stringValue": v}
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, list):
        return {"arrayValue": {"values": [any_value(x) for x in v]}}
    return {"kvlistValue": {"values": [{"key": k, "value": any_value(x)} for k, x in v.items()]}}


def trace_request(trace: str = TRACE, later_s: int = 0) -> dict:
    """The spans of `opentelemetry-instrumentation-openai-v2` writing its messages as events only: a chat span
    (GenAI attributes, no message) under the app's span naming the conversation."""
    at = 1700000000 + later_s
    chat = {"traceId": trace, "spanId": CALL, "parentSpanId": "a0f067aa0ba902b7", "name": "chat gpt-4o-mini",
            "startTimeUnixNano": f"{at}000000000", "endTimeUnixNano": f"{at + 1}000000000",
            "attributes": [{"key": k, "value": any_value(v)} for k, v in {
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.system": "openai"}.items()]}
    root = {"traceId": trace, "spanId": "a0f067aa0ba902b7", "name": "chat turn",
            "startTimeUnixNano": f"{at - 1}000000000", "endTimeUnixNano": f"{at + 2}000000000",
            "attributes": [{"key": "gen_ai.conversation.id", "value": {"stringValue": "chat-1"}}]}
    return {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "bot"}}]},
                               "scopeSpans": [{"spans": [chat, root]}]}]}


def legacy_events(question: str = QUESTION) -> list[tuple[str, object]]:
    """The per-message events (event name, body), in the order the instrumentor emits them."""
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "sso"}'}}
    return [("gen_ai.system.message", {"content": "Answer from the help center; link what you use."}),
            ("gen_ai.user.message", {"content": question}),
            ("gen_ai.assistant.message", {"tool_calls": [call]}),
            ("gen_ai.tool.message", {"content": HITS, "id": "c1"}),
            ("gen_ai.choice", {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": ANSWER}})]


def details_event() -> list[tuple[str, object, dict]]:
    """The newer form: one record, the messages as structured attributes."""
    inputs = [{"role": "user", "parts": [{"type": "text", "content": QUESTION}]},
              {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "lookup",
                                               "arguments": {"q": "sso"}}]},
              {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": HITS}]}]
    outputs = [{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}], "finish_reason": "stop"}]
    return [("gen_ai.client.inference.operation.details", None,
             {"gen_ai.operation.name": "chat", "gen_ai.input.messages": inputs, "gen_ai.output.messages": outputs})]


def logs_request(events, trace: str = TRACE, *, as_attribute: bool = False) -> dict:
    """A logs request of `events` ((name, body[, attributes])) tied to the chat span; `as_attribute`: the event name
    in the `event.name` attribute, as older SDKs write it, instead of the record's `eventName`."""
    records = []
    for i, (name, body, *attrs) in enumerate(events):
        attributes = {"gen_ai.system": "openai", **(attrs[0] if attrs else {}), **({"event.name": name} if as_attribute else {})}
        record = {"timeUnixNano": str(1700000000000000000 + i), "traceId": trace, "spanId": CALL,
                  "attributes": [{"key": k, "value": any_value(v)} for k, v in attributes.items()]}
        if not as_attribute:
            record["eventName"] = name
        if body is not None:
            record["body"] = any_value(body)
        records.append(record)
    return {"resourceLogs": [{"scopeLogs": [{"logRecords": records}]}]}


def protobuf(data: dict, kind) -> bytes:
    """The OTLP JSON request `data` as protobuf (read as the receiver reads JSON)."""
    message = kind()
    (_trace_json if kind is ExportTraceServiceRequest else _logs_json)(copy.deepcopy(data), message)
    return message.SerializeToString()


@pytest.fixture
def receiver(tmp_path):
    a = Assembler(TraceWriter(tmp_path / "t.duckdb"), Resolver(), name="rx")
    server = make_server(a, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    yield a, base, tmp_path / "t.duckdb"
    server.shutdown()
    server.server_close()
    a.finish(0)


def check_turn(turn: dict) -> None:
    assert turn["status"] == "ok", turn["audit"]["reason"]
    assert turn["question"] == QUESTION
    assert turn["sets"] == {"retrieved": ["sso"], "cited": ["sso"], "consulted": ["sso"]}
    assert [(c["name"], c["args"]) for c in turn["tool_calls"]] == [("lookup", {"q": "sso"})]
    assert turn["conversation_id"].endswith("/chat-1")


def test_events_after_their_spans_wait_and_make_the_turn(receiver):
    a, base, db = receiver
    assert _post(base + "/v1/traces", protobuf(trace_request(), ExportTraceServiceRequest), "application/x-protobuf")[0] == 200
    assert a.turns == 0 and TRACE in a.parked  # the root came, the call's messages have not: it waits
    status, _ = _post(base + "/v1/logs", protobuf(logs_request(legacy_events()), ExportLogsServiceRequest),
                      "application/x-protobuf")
    assert status == 200
    [turn] = _payloads(db)  # written before the logs request was answered
    check_turn(turn)
    assert a.parked == {} and a.logs.n == 0


def test_events_before_their_spans_are_joined_at_once_json_gzip_and_the_event_name_attribute(receiver):
    a, base, db = receiver
    body = gzip.compress(json.dumps(logs_request(legacy_events(), as_attribute=True)).encode())
    assert _post(base + "/v1/logs", body, "application/json", "gzip") == (200, b"{}")
    assert a.turns == 0 and a.logs.n == 5
    assert _post(base + "/v1/traces", json.dumps(trace_request()).encode())[0] == 200
    [turn] = _payloads(db)
    check_turn(turn)


def test_the_operation_details_record_is_read_as_the_calls_messages(receiver):
    a, base, db = receiver
    assert _post(base + "/v1/traces", json.dumps(trace_request()).encode())[0] == 200
    assert _post(base + "/v1/logs", protobuf(logs_request(details_event()), ExportLogsServiceRequest),
                 "application/x-protobuf")[0] == 200
    [turn] = _payloads(db)
    check_turn(turn)


def test_a_trace_whose_events_never_come_is_audited_unauditable_after_the_bound_and_late_events_make_no_turn(
        receiver, monkeypatch):
    a, base, db = receiver
    monkeypatch.setattr(collector, "LOG_WAIT_SECONDS", 0.3)
    assert _post(base + "/v1/traces", json.dumps(trace_request()).encode())[0] == 200
    deadline = time.monotonic() + 30
    while not _payloads(db) and time.monotonic() < deadline:  # the collector's own thread ends the wait
        time.sleep(0.05)
    [turn] = _payloads(db)
    assert turn["status"] == "unauditable" and "records no input messages" in turn["audit"]["reason"]
    assert _post(base + "/v1/logs", json.dumps(logs_request(legacy_events())).encode())[0] == 200
    assert len(_payloads(db)) == 1 and a.logs.late == 5 and a.logs.n == 0
    said = io.StringIO()
    report(a, said)  # never dropped silently: collect's report says so
    assert "5 GenAI log events were not joined to their spans: 5 came after their trace was audited" in said.getvalue()


def test_secrets_in_event_bodies_are_redacted_and_a_record_over_the_bound_makes_the_call_unauditable(receiver):
    a, base, db = receiver
    asked = f"{QUESTION} My key is {SECRET}"
    assert _post(base + "/v1/logs", json.dumps(logs_request(legacy_events(asked))).encode())[0] == 200
    assert _post(base + "/v1/traces", json.dumps(trace_request()).encode())[0] == 200
    [turn] = _payloads(db)
    assert SECRET not in json.dumps(turn) and "[redacted]" in turn["question"]
    other = "5b8efff798038103d269b633813fc60c"
    events = legacy_events()
    events[3] = ("gen_ai.tool.message", {"content": "x" * (MAX_ATTRIBUTE_CHARS + 1), "id": "c1"})
    assert _post(base + "/v1/logs", json.dumps(logs_request(events, other)).encode())[0] == 200
    assert _post(base + "/v1/traces", json.dumps(trace_request(other)).encode())[0] == 200
    cut = [t for t in _payloads(db) if t["turn_id"] == f"otel-{other}"][0]
    assert cut["status"] == "unauditable" and "size bound" in cut["audit"]["reason"]


def test_a_bad_logs_body_is_a_clear_400(receiver):
    _, base, _ = receiver
    status, body = _post(base + "/v1/logs", b"{not json")
    assert status == 400 and b"not JSON" in body
    status, body = _post(base + "/v1/logs", b"\x0a\xff\xff\xff", "application/x-protobuf")
    assert status == 400 and b"ExportLogsServiceRequest" in body


def test_ingest_reads_a_file_of_trace_and_logs_lines(tmp_path):
    path, db = tmp_path / "otlp.jsonl", tmp_path / "t.duckdb"
    path.write_text(json.dumps(logs_request(legacy_events())) + "\n" + json.dumps(trace_request()) + "\n",
                    encoding="utf-8")
    out = cli("ingest", str(path), "--db", str(db))
    assert out.returncode == 0, out.stderr
    [turn] = _payloads(db)
    check_turn(turn)


def test_only_genai_spans_without_messages_of_their_own_wait():
    def span(**attributes) -> Span:
        return Span(TRACE, CALL, None, "chat", 1, 2, attributes)
    assert logs.awaits_logs([span(**{"gen_ai.operation.name": "chat"})], [])
    assert not logs.awaits_logs([span(**{"openinference.span.kind": "LLM"})], [])  # OpenInference sends no events
    assert not logs.awaits_logs([span(**{"gen_ai.operation.name": "chat", "gen_ai.input.messages": "[]"})], [])
    choice = logs.LogEvent(TRACE, CALL, "gen_ai.choice", {})
    assert not logs.awaits_logs([span(**{"gen_ai.operation.name": "chat"})], [choice])


def test_verify_refuses_a_turn_whose_messages_came_only_as_log_events(receiver):
    """Log records are read, not stored: the turn's stored spans hold no model input to replay (exit 2, nothing sent)."""
    _, base, db = receiver
    assert _post(base + "/v1/logs", json.dumps(logs_request(legacy_events())).encode())[0] == 200
    assert _post(base + "/v1/traces", json.dumps(trace_request()).encode())[0] == 200
    out = cli("verify", "--turn", f"otel-{TRACE}", "--endpoint", "http://127.0.0.1:9/v1", "--db", str(db))
    assert out.returncode == 2 and "GenAI log events" in out.stderr, out.stderr


def test_ingest_reads_a_traces_file_and_a_logs_file_together_and_reports_the_events(tmp_path):
    traces, events, db = tmp_path / "traces.jsonl", tmp_path / "logs.jsonl", tmp_path / "t.duckdb"
    traces.write_text(json.dumps(trace_request()) + "\n", encoding="utf-8")
    events.write_text(json.dumps(logs_request(legacy_events())) + "\n", encoding="utf-8")
    out = cli("ingest", str(traces), str(events), "--db", str(db))
    assert out.returncode == 0, out.stderr
    assert "1 spans" not in out.stderr and "2 spans, 5 GenAI log events received, 1 turns written" in out.stderr
    [turn] = _payloads(db)
    check_turn(turn)


def test_a_conversations_turns_are_audited_in_the_order_they_started_whichever_events_come_first(receiver):
    """Turn 2's events and spans all came while turn 1 still waits for its events: turn 2 waits behind it, so it is
    the conversation's second turn and sees the first as earlier (not the other way round)."""
    a, base, db = receiver
    second = "5b8efff798038103d269b633813fc60c"
    followup = "And is SAML required?"
    assert _post(base + "/v1/traces", json.dumps(trace_request()).encode())[0] == 200  # turn 1: waits for its events
    assert _post(base + "/v1/logs", json.dumps(logs_request(legacy_events(followup), second)).encode())[0] == 200
    assert _post(base + "/v1/traces", json.dumps(trace_request(second, later_s=60)).encode())[0] == 200
    assert a.turns == 0 and set(a.parked) == {TRACE, second}  # turn 2 is complete, yet waits behind turn 1
    assert _post(base + "/v1/logs", json.dumps(logs_request(legacy_events())).encode())[0] == 200
    turns = sorted(_payloads(db), key=lambda t: t["position"])
    assert [(t["turn_id"], t["question"]) for t in turns] == [(f"otel-{TRACE}", QUESTION), (f"otel-{second}", followup)]
    assert [t["position"] for t in turns] == [1, 2] and turns[0]["conversation_id"] == turns[1]["conversation_id"]
