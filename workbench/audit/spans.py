"""OTLP trace requests into typed spans (docs/design.md §12 *Input*), parsed by `opentelemetry-proto`.

A request is an `ExportTraceServiceRequest`, as protobuf (the OTel SDK's default) or as OTLP JSON, gzip or not.
OTLP JSON writes trace and span ids as hex where protobuf's JSON mapping expects base64, so the ids are
re-encoded before `json_format` parses the message; nothing else is read by hand. An `ExportLogsServiceRequest` (the
GenAI log events `collect` takes on /v1/logs) is decoded here the same way (`parse_logs`); `logs.py` reads its records.

Bounds (docs/security.md): a body over `MAX_BODY_BYTES`, before or after gzip, is refused (`BodyTooLarge`); a
string attribute over `MAX_ATTRIBUTE_CHARS` is not kept: its value becomes `CUT_MARK` and the span lists the key
in `cut`, so a turn that needs it ends `unauditable` instead of being judged on part of its input; a start time
beyond the clock-skew bound is clamped to the receive time (`on_receiving_clock`). Every attribute is redacted as
it is read (`bounded`, `redact.redact_attributes`).
"""

from __future__ import annotations

import base64
import json
import zlib
from dataclasses import dataclass, field, replace
from typing import Any, Iterator

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ..errors import WorkbenchError
from ..redact import redact_attributes

#: The largest request body accepted, compressed or not, and the largest a gzip body may inflate to.
MAX_BODY_BYTES = 16 * 1024 * 1024
#: The longest string attribute value kept; a longer one is replaced by `CUT_MARK` (the span records the key).
MAX_ATTRIBUTE_CHARS = 1_000_000
CUT_MARK = "__CUT_BY_WORKBENCH__"
#: The clock-skew bound: a span may start at most this far ahead of the receiving clock (docs/security.md).
MAX_CLOCK_SKEW_NS = 3_600 * 10**9
#: …and not before 2000-01-01T00:00:00Z (an unset start time is 1970): earlier starts are clamped too.
EARLIEST_START_NS = 946_684_800 * 10**9
_ID_FIELDS = ("traceId", "spanId", "parentSpanId")
#: Span events that carry a model call's messages (the GenAI conventions' event forms), and the keys read from them.
_EVENT_KEYS = {"gen_ai.content.prompt": ("gen_ai.prompt",), "gen_ai.content.completion": ("gen_ai.completion",),
               "gen_ai.client.inference.operation.details": ("gen_ai.input.messages", "gen_ai.output.messages",
                                                             "gen_ai.system_instructions")}
#: OTel GenAI `gen_ai.operation.name` values as OpenInference span kinds.
_GENAI_KINDS = {"chat": "LLM", "text_completion": "LLM", "completion": "LLM", "generate_content": "LLM",
                "execute_tool": "TOOL", "embeddings": "EMBEDDING", "invoke_agent": "AGENT", "create_agent": "AGENT"}


class SpanFormatError(WorkbenchError):
    """A request that is no OTLP trace request, or a span without ids (an HTTP 400, a CLI exit 2)."""


class BodyTooLarge(SpanFormatError):
    """A body over `MAX_BODY_BYTES` (an HTTP 413)."""


@dataclass(frozen=True, slots=True)
class Span:
    """One span as the audit reads it: ids as hex, attributes flattened (`llm.input_messages.0.message.role`)."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)
    service: str | None = None
    dropped_attributes: int = 0
    cut: tuple[str, ...] = ()
    status: str = "unset"
    #: The start time the exporter sent, when it was beyond the clock-skew bound and clamped (`on_receiving_clock`).
    clamped_from: int | None = None

    @property
    def kind(self) -> str | None:
        """The span's kind in OpenInference's words (`LLM`, `RETRIEVER`, `RERANKER`, `TOOL`, `CHAIN`, …), or None:
        `openinference.span.kind`, else read from the OTel GenAI conventions (`gen_ai.operation.name`, or
        OpenLLMetry's `llm.request.type`), so no rule needs to know which instrumentor wrote the span."""
        value = self.attributes.get("openinference.span.kind")
        if isinstance(value, str):
            return value.upper()
        operation = self.attributes.get("gen_ai.operation.name")
        if isinstance(operation, str):
            return _GENAI_KINDS.get(operation.lower())
        request = self.attributes.get("llm.request.type")
        return "LLM" if isinstance(request, str) and request.lower() in ("chat", "completion") else None

    def to_json(self) -> dict[str, Any]:
        return {"trace_id": self.trace_id, "span_id": self.span_id, "parent_id": self.parent_id, "name": self.name,
                "start_ns": self.start_ns, "end_ns": self.end_ns, "attributes": self.attributes,
                "service": self.service, "dropped_attributes": self.dropped_attributes, "cut": list(self.cut),
                "status": self.status, **({"clamped_from": self.clamped_from} if self.clamped_from is not None else {})}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Span:
        return cls(trace_id=d["trace_id"], span_id=d["span_id"], parent_id=d.get("parent_id"), name=d["name"],
                   start_ns=d["start_ns"], end_ns=d["end_ns"], attributes=dict(d.get("attributes") or {}),
                   service=d.get("service"), dropped_attributes=d.get("dropped_attributes", 0),
                   cut=tuple(d.get("cut") or ()), status=d.get("status", "unset"), clamped_from=d.get("clamped_from"))


def on_receiving_clock(spans: list[Span], received_ns: int) -> list[Span]:
    """`spans` with each start time beyond the clock-skew bound (over `MAX_CLOCK_SKEW_NS` ahead of `received_ns`,
    or before `EARLIEST_START_NS`) clamped to `received_ns`, keeping its duration when that is sane, and the start
    as sent in `clamped_from`: a clock that is wrong (or a hostile exporter) never sorts a turn first."""
    out = []
    for s in spans:
        if EARLIEST_START_NS <= s.start_ns <= received_ns + MAX_CLOCK_SKEW_NS:
            out.append(s)
            continue
        duration = s.end_ns - s.start_ns
        duration = duration if 0 <= duration <= MAX_CLOCK_SKEW_NS else 0
        out.append(replace(s, start_ns=received_ns, end_ns=received_ns + duration, clamped_from=s.start_ns))
    return out


def inflate(body: bytes, encoding: str | None) -> bytes:
    """The request body without its `Content-Encoding` (gzip, deflate or none), bounded by `MAX_BODY_BYTES`."""
    if len(body) > MAX_BODY_BYTES:
        raise BodyTooLarge(f"request body of {len(body)} bytes is over the {MAX_BODY_BYTES}-byte bound")
    encoding = (encoding or "identity").strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "deflate"):
        raise SpanFormatError(f"unsupported Content-Encoding {encoding!r} (send gzip, deflate or none)")
    out, rest = b"", body
    while rest:  # a gzip body may be several members one after the other (RFC 1952 §2.2): each is inflated
        inflater = zlib.decompressobj(wbits=31 if encoding == "gzip" else 15)
        try:
            out += inflater.decompress(rest, MAX_BODY_BYTES + 1 - len(out))
        except zlib.error as exc:
            raise SpanFormatError(f"body is not valid {encoding}: {exc}") from None
        if len(out) > MAX_BODY_BYTES or inflater.unconsumed_tail:
            raise BodyTooLarge(f"request body inflates to over the {MAX_BODY_BYTES}-byte bound")
        if not inflater.eof:
            raise SpanFormatError(f"body is not valid {encoding}: it ends inside a compressed stream")
        rest = inflater.unused_data if encoding == "gzip" else b""
    return out


def parse_request(body: bytes, content_type: str | None) -> list[Span]:
    """The spans of one OTLP trace request (`application/x-protobuf` or `application/json`)."""
    return list(spans_of(decode(body, content_type, ExportTraceServiceRequest(), _parse_json)))


def parse_logs(body: bytes, content_type: str | None) -> ExportLogsServiceRequest:
    """One OTLP logs request, protobuf or JSON (its GenAI events are read by `logs.py`)."""
    return decode(body, content_type, ExportLogsServiceRequest(), _logs_json)


def decode(body: bytes, content_type: str | None, request, parse_json):
    """`request` (an OTLP export request message) read from `body`: protobuf, or JSON read by `parse_json(data,
    request)` (which re-encodes the hex ids); a body that is neither is a `SpanFormatError`."""
    kind = (content_type or "application/x-protobuf").split(";")[0].strip().lower()
    name = type(request).__name__
    if kind == "application/json":
        try:
            data = json.loads(body)
        except (ValueError, RecursionError) as exc:
            raise SpanFormatError(f"body is not JSON: {exc}") from None
        parse_json(data, request)
    elif kind in ("application/x-protobuf", "application/protobuf", "application/octet-stream"):
        try:
            request.ParseFromString(body)
        except (DecodeError, RecursionError) as exc:
            raise SpanFormatError(f"body is not an OTLP {name} (protobuf): {exc}") from None
    else:
        raise SpanFormatError(f"unsupported Content-Type {kind!r} (send application/x-protobuf or application/json)")
    return request


def parse_json_line(line: str) -> list[Span]:
    """The spans of one line of an OTLP JSON lines file (one `ExportTraceServiceRequest` a line)."""
    return parse_request(line.encode("utf-8"), "application/json")


def _parse_json(data: Any, request: ExportTraceServiceRequest) -> None:
    _hex_ids(data, ("resourceSpans", "scopeSpans", "spans"), _ID_FIELDS)
    parse_dict(data, request)


def _logs_json(data: Any, request: ExportLogsServiceRequest) -> None:
    _hex_ids(data, ("resourceLogs", "scopeLogs", "logRecords"), ("traceId", "spanId"))
    parse_dict(data, request)


def _hex_ids(data: Any, path: tuple[str, str, str], fields: tuple[str, ...]) -> None:
    """The hex ids of an OTLP JSON request's items (`path`: its resource, scope and item lists) as base64, in place."""
    if not isinstance(data, dict):
        raise SpanFormatError(f"an OTLP JSON request is an object with {path[0]}")
    for outer in data.get(path[0]) or ():
        for scope in (outer.get(path[1]) or ()) if isinstance(outer, dict) else ():
            for item in (scope.get(path[2]) or ()) if isinstance(scope, dict) else ():
                for key in fields if isinstance(item, dict) else ():
                    if isinstance(item.get(key), str):
                        item[key] = _hex_to_base64(item[key], key)


def parse_dict(data: dict, request) -> None:
    """`request` read from its OTLP JSON (ids already base64), or a `SpanFormatError`."""
    try:
        json_format.ParseDict(data, request, ignore_unknown_fields=True)
    except (json_format.ParseError, RecursionError, ValueError, TypeError) as exc:
        raise SpanFormatError(f"body is not an OTLP {type(request).__name__} (JSON): {exc}") from None


def _hex_to_base64(value: str, key: str) -> str:
    """OTLP JSON ids are hex (the OTLP specification); protobuf's JSON mapping reads bytes as base64."""
    try:
        return base64.b64encode(bytes.fromhex(value)).decode("ascii")
    except ValueError:
        raise SpanFormatError(f"span {key} {value[:40]!r} is not hex") from None


def spans_of(request: ExportTraceServiceRequest) -> Iterator[Span]:
    for rs in request.resource_spans:
        resource = {kv.key: any_value(kv.value) for kv in rs.resource.attributes}
        service = resource.get("service.name")
        for ss in rs.scope_spans:
            for i, s in enumerate(ss.spans):
                if len(s.trace_id) != 16 or not any(s.trace_id) or len(s.span_id) != 8 or not any(s.span_id):
                    raise SpanFormatError(f"span {i} ({s.name[:80]!r}) has no valid trace_id or span_id "
                                          "(16 and 8 bytes, not all zero)")
                attributes, cut = bounded(_with_events({kv.key: any_value(kv.value) for kv in s.attributes}, s.events))
                parent = s.parent_span_id.hex() if len(s.parent_span_id) == 8 and any(s.parent_span_id) else None
                yield Span(trace_id=s.trace_id.hex(), span_id=s.span_id.hex(), parent_id=parent, name=s.name,
                           start_ns=s.start_time_unix_nano, end_ns=s.end_time_unix_nano, attributes=attributes,
                           service=service if isinstance(service, str) else None,
                           dropped_attributes=s.dropped_attributes_count, cut=cut,
                           status={0: "unset", 1: "ok", 2: "error"}.get(s.status.code, "unset"))


def _with_events(attributes: dict[str, Any], events) -> dict[str, Any]:
    """The span's attributes plus the messages a GenAI span event carries (`gen_ai.content.prompt` /
    `.completion` with `gen_ai.prompt` / `gen_ai.completion`, `gen_ai.client.inference.operation.details` with
    `gen_ai.input.messages` / `gen_ai.output.messages`), where the span has no such attribute of its own."""
    for event in events:
        keys = _EVENT_KEYS.get(event.name)
        for kv in event.attributes if keys else ():
            if kv.key in keys and kv.key not in attributes:
                attributes[kv.key] = any_value(kv.value)
    return attributes


def bounded(attributes: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """`attributes` with each string over `MAX_ATTRIBUTE_CHARS` replaced by `CUT_MARK`, and the keys cut, every
    secret redacted (`redact.redact_attributes`): the one point every span the audit reads passes (OTLP requests,
    OTLP JSON files, Phoenix projects), so nothing is stored, assembled or replayed with a secret in it."""
    cut = tuple(k for k, v in attributes.items() if isinstance(v, str) and len(v) > MAX_ATTRIBUTE_CHARS)
    for k in cut:
        attributes[k] = CUT_MARK
    return redact_attributes(attributes), cut


def any_value(v) -> Any:
    """An OTLP AnyValue as a Python value (arrays as lists, key-value lists as dicts, bytes as hex)."""
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [any_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in v.kvlist_value.values}
    if kind == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, kind) if kind else None
