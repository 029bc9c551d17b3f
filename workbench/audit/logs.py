"""The OTel GenAI conventions' log events (docs/design.md §12, docs/audit.md "GenAI log events"): an SDK that sends a
model call's messages to the OTLP **logs** endpoint (`POST /v1/logs`; the official
`opentelemetry-instrumentation-openai-v2` by default: `gen_ai.system.message`, `gen_ai.user.message`,
`gen_ai.assistant.message`, `gen_ai.tool.message`, `gen_ai.choice`; or one `gen_ai.client.inference.operation.details`
record) ties each record to its span by trace and span id. The records are joined to that span when its trace is
assembled and written on it as the GenAI messages (`gen_ai.input.messages` / `gen_ai.output.messages`, messages of
`parts`) where the span has none of its own, so `shapes.read_messages` reads them into the one internal shape and no
rule knows they came as logs.

**The waiting rule.** A trace whose root span has come is assembled at once, unless one of its model calls written
in the GenAI conventions (no `openinference.span.kind`) records no messages of its own and no output event
(`gen_ai.choice`, an operation-details record) has come for it: such a trace waits for its log records, at most
`LOG_WAIT_SECONDS` after its root came, then is assembled with what came (a call with no messages is `unauditable`,
never guessed); a later turn of its conversation waits behind it, so a conversation's turns are still assembled in
the order they started (`collector.Assembler._released`). A log record that comes before its span waits with the pending spans (`PendingLogs`: at most
`MAX_PENDING_LOGS` records, the trace whose records came first dropped first); one that comes after its trace was
assembled is dropped (counted), never a second turn. Records are bounded and redacted as span attributes are
(`spans.bounded`, `redact.redact_value`); a record over the size bound makes its call `unauditable` (cut). Records
are read, not stored: `audit_spans` keeps the spans as received.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Iterator

from ..redact import redact_value
from .spans import CUT_MARK, MAX_ATTRIBUTE_CHARS, Span, any_value, bounded, parse_logs

#: Log records held while their trace has not been assembled (the same window as `collector.MAX_PENDING_SPANS`).
MAX_PENDING_LOGS = 100_000
#: How long a trace whose model calls record no messages of their own waits for their log events once its root came.
LOG_WAIT_SECONDS = 10.0
#: Events that carry a message of the model's input, by event name -> role (the older GenAI event names).
_INPUT_EVENTS = {"gen_ai.system.message": "system", "gen_ai.user.message": "user",
                 "gen_ai.assistant.message": "assistant", "gen_ai.tool.message": "tool"}
_CHOICE = "gen_ai.choice"
#: Events carrying the messages as attributes (the newer form, and the span-event names some SDKs log instead).
_DETAILS = {"gen_ai.client.inference.operation.details": ("gen_ai.input.messages", "gen_ai.output.messages",
                                                          "gen_ai.system_instructions"),
            "gen_ai.content.prompt": ("gen_ai.prompt",), "gen_ai.content.completion": ("gen_ai.completion",)}
_OUTPUT_EVENTS = {_CHOICE, "gen_ai.client.inference.operation.details", "gen_ai.content.completion"}
#: Attributes (prefixes) in which a span records its model messages itself: such a span waits for no log.
_OWN_MESSAGES = ("llm.input_messages.", "llm.output_messages.", "input.value", "output.value", "gen_ai.input.messages",
                 "gen_ai.output.messages", "gen_ai.prompt", "gen_ai.completion")


@dataclass(frozen=True, slots=True)
class LogEvent:
    """One GenAI log record tied to a span: its event name, body and attributes (bounded, redacted), its time."""

    trace_id: str
    span_id: str
    name: str
    body: Any
    attributes: dict[str, Any] = field(default_factory=dict)
    time_ns: int = 0
    cut: bool = False

    @property
    def is_output(self) -> bool:
        return self.name in _OUTPUT_EVENTS


def parse_logs_request(body: bytes, content_type: str | None) -> list[LogEvent]:
    """The GenAI events of one OTLP logs request (`application/x-protobuf` or `application/json`); records that are no
    GenAI message event, or are tied to no span, are not read."""
    return list(events_of(parse_logs(body, content_type)))


def parse_logs_json_line(line: str) -> list[LogEvent]:
    """The GenAI events of one line of an OTLP JSON lines file (an `ExportLogsServiceRequest`)."""
    return parse_logs_request(line.encode("utf-8"), "application/json")


def events_of(request) -> Iterator[LogEvent]:
    """The GenAI events of an `ExportLogsServiceRequest` (`spans.parse_logs`)."""
    for rl in request.resource_logs:
        for sl in rl.scope_logs:
            for r in sl.log_records:
                attributes = {kv.key: any_value(kv.value) for kv in r.attributes}
                name = r.event_name or attributes.get("event.name")
                if not (name in _INPUT_EVENTS or name == _CHOICE or name in _DETAILS):
                    continue
                if len(r.trace_id) != 16 or not any(r.trace_id) or len(r.span_id) != 8 or not any(r.span_id):
                    continue  # not tied to a span: nothing to join it to
                attributes, cut = bounded(attributes)
                body = any_value(r.body) if r.HasField("body") else None
                too_long = len(json.dumps([body, attributes], ensure_ascii=False, default=str)) > MAX_ATTRIBUTE_CHARS
                yield LogEvent(trace_id=r.trace_id.hex(), span_id=r.span_id.hex(), name=str(name),
                               body=CUT_MARK if too_long else redact_value(body), attributes=attributes,
                               time_ns=r.time_unix_nano or r.observed_time_unix_nano, cut=bool(cut) or too_long)


class PendingLogs:
    """Log events waiting for their trace's assembly, by trace; at most `limit`, the trace whose events came first
    dropped first (`dropped` counts the events; `late` those of a trace already assembled, `received` all). Not thread-safe: the assembler holds its lock around every call."""

    def __init__(self, limit: int = MAX_PENDING_LOGS):
        self.limit, self.n, self.dropped, self.late, self.received = limit, 0, 0, 0, 0
        self.by_trace: dict[str, list[LogEvent]] = {}

    def add(self, event: LogEvent) -> None:
        self.by_trace.setdefault(event.trace_id, []).append(event)
        self.n += 1
        while self.n > self.limit:
            oldest = next(iter(self.by_trace))
            gone = self.by_trace.pop(oldest)
            self.n -= len(gone)
            self.dropped += len(gone)

    def pop(self, trace_id: str) -> list[LogEvent]:
        events = self.by_trace.pop(trace_id, [])
        self.n -= len(events)
        return events

    def of(self, trace_id: str) -> list[LogEvent]:
        return self.by_trace.get(trace_id, [])


def awaits_logs(spans: Iterable[Span], events: list[LogEvent]) -> bool:
    """Whether the trace should wait for log events: a model call written in the GenAI conventions records no
    messages of its own and no output event has come for it."""
    answered = {e.span_id for e in events if e.is_output}
    return any(s.kind == "LLM" and "openinference.span.kind" not in s.attributes and s.span_id not in answered
               and not any(k.startswith(_OWN_MESSAGES) for k in s.attributes) for s in spans)


def joined(spans: list[Span], events: list[LogEvent]) -> list[Span]:
    """`spans` with each one's log events written on it as GenAI messages (where it has none of its own)."""
    if not events:
        return spans
    by_span: dict[str, list[LogEvent]] = defaultdict(list)
    for e in sorted(events, key=lambda e: e.time_ns):  # stable: records of one time keep their arrival order
        by_span[e.span_id].append(e)
    return [_with_events(s, by_span[s.span_id]) if s.span_id in by_span else s for s in spans]


def _with_events(span: Span, events: list[LogEvent]) -> Span:
    attributes = dict(span.attributes)
    for e in events:
        for key in _DETAILS.get(e.name, ()):
            if key in e.attributes and key not in attributes:
                attributes[key] = e.attributes[key]
    inputs = [_message(_INPUT_EVENTS[e.name], e.body) for e in events if e.name in _INPUT_EVENTS]
    choices = sorted((e.body for e in events if e.name == _CHOICE and isinstance(e.body, dict)),
                     key=lambda b: b.get("index", 0) if isinstance(b.get("index"), int) else 0)
    outputs = [_message("assistant", c.get("message") if isinstance(c.get("message"), dict) else {}) for c in choices]
    if inputs and "gen_ai.input.messages" not in attributes:
        attributes["gen_ai.input.messages"] = json.dumps(inputs, ensure_ascii=False)
    if outputs and "gen_ai.output.messages" not in attributes:
        attributes["gen_ai.output.messages"] = json.dumps(outputs, ensure_ascii=False)
    cut = span.cut + (("gen_ai.input.messages",) if any(e.cut for e in events) else ())
    return replace(span, attributes=attributes, cut=cut)


def _message(role: str, body: Any) -> dict[str, Any]:
    """One event body (`{"content", "tool_calls", "id"}`, or a choice's `message`) as a GenAI message of parts."""
    body = body if isinstance(body, dict) else {"content": body} if body is not None else {}
    role = str(body.get("role") or role)
    text = _text(body.get("content"))
    parts: list[dict[str, Any]] = []
    if role == "tool":
        parts.append({"type": "tool_call_response", "id": body.get("id"), "response": text or ""})
    elif text is not None:
        parts.append({"type": "text", "content": text})
    for call in body.get("tool_calls") or ():
        if isinstance(call, dict):
            fn = call.get("function") if isinstance(call.get("function"), dict) else call
            parts.append({"type": "tool_call", "id": call.get("id"), "name": fn.get("name", ""),
                          "arguments": fn.get("arguments")})
    return {"role": role, "parts": parts}


def _text(content: Any) -> str | None:
    """A message's content as text: a string as is, a list of parts by their text, anything else as JSON."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) for p in content):
        return "\n".join(str(p.get("text", p.get("content", ""))) for p in content)
    return json.dumps(content, ensure_ascii=False)
