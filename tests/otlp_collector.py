"""A loopback OTLP/HTTP collector: decodes the protobuf the real OTel exporter sends and keeps the spans.

Modes: `ok` answers 200 with an empty ExportTraceServiceResponse; `hang` holds every request until
`release()` (a collector that never answers); `error` answers 500. Refused connections: use
`loopback.refused_url()`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from http_server import LoopbackServer, send

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (ExportTraceServiceRequest,
                                                                      ExportTraceServiceResponse)
from workbench.audit.spans import any_value




@dataclass
class ReceivedSpan:
    trace_id: int
    span_id: int
    parent_id: int | None
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    status_code: int
    status_message: str
    resource: dict[str, Any]


@dataclass
class Collector(LoopbackServer):
    mode: str = "ok"
    spans: list[ReceivedSpan] = field(default_factory=list)
    requests: int = 0
    headers: list[dict[str, str]] = field(default_factory=list)

    def __post_init__(self):
        self._lock = threading.Lock()
        self._release = threading.Event()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with collector._lock:
                    collector.requests += 1
                    collector.headers.append({k.lower(): v for k, v in self.headers.items()})
                if collector.mode == "hang":
                    collector._release.wait(60)
                    return
                if collector.mode == "error":
                    self._send(500, b"collector failure")
                    return
                collector._keep(body)
                self._send(200, ExportTraceServiceResponse().SerializeToString())

            def _send(self, status: int, data: bytes):
                send(self, status, data, "application/x-protobuf")

        self._serve(Handler)

    def _keep(self, body: bytes) -> None:
        req = ExportTraceServiceRequest()
        req.ParseFromString(body)
        got = []
        for rs in req.resource_spans:
            resource = {kv.key: any_value(kv.value) for kv in rs.resource.attributes}
            for ss in rs.scope_spans:
                for s in ss.spans:
                    got.append(ReceivedSpan(int.from_bytes(s.trace_id, "big"), int.from_bytes(s.span_id, "big"),
                                            int.from_bytes(s.parent_span_id, "big") if s.parent_span_id else None,
                                            s.name, s.start_time_unix_nano, s.end_time_unix_nano,
                                            {kv.key: any_value(kv.value) for kv in s.attributes},
                                            s.status.code, s.status.message, resource))
        with self._lock:
            self.spans.extend(got)

    @property
    def url(self) -> str:
        return super().url + "/v1/traces"

    def release(self) -> None:
        self._release.set()

    def __exit__(self, *exc):
        self.release()
        super().__exit__(*exc)
