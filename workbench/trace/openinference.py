"""OpenInference spans over OTLP/HTTP: the one module that imports the OpenTelemetry SDK.

`export_turns` sends the spans of stored turns (`spans.turn_spans`) through `opentelemetry-sdk`'s
`ReadableSpan` and the OTLP/HTTP span exporter, with the stored ids and times (never "now"), so
Arize Phoenix, Langfuse or any OTLP collector that reads OpenInference shows them. `annotate_phoenix`
additionally logs each retrieved document's consulted flag as a Phoenix document annotation, which
Phoenix turns into retrieval metrics (precision@k, NDCG, hit rate) with "consulted" as the relevance
label; that call is Phoenix's own REST API, not OTLP.

The SDK is imported when a function here is first called, never at `import workbench`: `ask` starts
in well under a second and must stay so (`python -X importtime -m workbench ask …`).
"""

from __future__ import annotations

import functools
import json
import logging
import socket
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Iterable, Sequence
from urllib.parse import urlsplit, urlunsplit

from .. import __version__
from ..errors import WorkbenchError
from .spans import DEFAULT_PROJECT, PROJECT_NAME, SpanSpec, TurnRows, turn_spans

DEFAULT_TIMEOUT_S = 10.0
TRACES_PATH = "/v1/traces"  # the OTLP/HTTP default path for spans
BATCH_SPANS = 512  # spans per OTLP request (whole turns only)


class ExportError(WorkbenchError):
    """The collector refused the spans or could not be reached."""


def traces_endpoint(url: str, what: str = "the endpoint") -> str:
    """The OTLP/HTTP traces URL for `url`: a bare `http://host:port` gets the default `/v1/traces` path.
    `what` names where the URL came from, for the error."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ExportError(f"{what} must be an http(s) URL such as http://127.0.0.1:6006/v1/traces, not {url!r}")
    if parts.path in ("", "/"):
        parts = parts._replace(path=TRACES_PATH)
    return urlunsplit(parts)


def base_url(endpoint: str) -> str:
    """The server's base URL (for Phoenix's REST API) from its OTLP traces endpoint."""
    parts = urlsplit(traces_endpoint(endpoint))
    path = parts.path[: -len(TRACES_PATH)] if parts.path.endswith(TRACES_PATH) else parts.path
    return urlunsplit((parts.scheme, parts.netloc, path.rstrip("/"), "", ""))


class _Messages(logging.Handler):
    """Keeps the exporter's warnings of the current export (per thread) so a failed export says why: the
    first names the cause (e.g. "Connection refused"), the last the outcome. Being a handler, it also keeps
    the SDK's retry chatter off stderr (Python prints unhandled warnings), while a user's own logging
    configuration still receives it."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.local = threading.local()

    def emit(self, record: logging.LogRecord) -> None:
        messages = getattr(self.local, "messages", None)
        if messages is not None:
            messages.append(record.getMessage()[:400])


_HANDLER = _Messages()


@functools.lru_cache(maxsize=1)
def _sdk() -> SimpleNamespace:
    """The OpenTelemetry SDK classes this module uses, imported on first use."""
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import ReadableSpan
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope
        from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags
    except ImportError as exc:
        raise ExportError(f"OpenInference export needs the OpenTelemetry SDK ({exc.name} is missing): "
                          "pip install -r requirements.txt") from None
    logging.getLogger("opentelemetry.exporter").addHandler(_HANDLER)
    return SimpleNamespace(OTLPSpanExporter=OTLPSpanExporter, Resource=Resource, ReadableSpan=ReadableSpan,
                           InstrumentationScope=InstrumentationScope, SpanContext=SpanContext, SpanKind=SpanKind,
                           Status=Status, StatusCode=StatusCode, TraceFlags=TraceFlags)


def _readable(spec: SpanSpec, resource, scope) -> Any:
    sdk = _sdk()

    def context(span_id: int):
        return sdk.SpanContext(spec.trace_id, span_id, is_remote=False, trace_flags=sdk.TraceFlags(sdk.TraceFlags.SAMPLED))

    status = sdk.Status(sdk.StatusCode.ERROR, spec.error) if spec.error else sdk.Status(sdk.StatusCode.OK)
    return sdk.ReadableSpan(name=spec.name, context=context(spec.span_id),
                            parent=context(spec.parent_id) if spec.parent_id is not None else None,
                            resource=resource, attributes=spec.attributes, kind=sdk.SpanKind.INTERNAL, status=status,
                            start_time=spec.start_ns, end_time=spec.end_ns, instrumentation_scope=scope)


@dataclass
class ExportResult:
    endpoint: str
    project: str
    turns: int = 0
    spans: int = 0
    annotations: int = 0


class SpanSender:
    """One OTLP/HTTP exporter for one endpoint and project; `send` exports the spans of some turns."""

    def __init__(self, endpoint: str, *, project: str = DEFAULT_PROJECT, timeout: float = DEFAULT_TIMEOUT_S,
                 headers: dict[str, str] | None = None):
        self.endpoint = traces_endpoint(endpoint)
        self.project = project or DEFAULT_PROJECT
        sdk = _sdk()
        self._resource = sdk.Resource.create({PROJECT_NAME: self.project, "service.name": "provenance-workbench"})
        self._scope = sdk.InstrumentationScope("workbench", __version__)
        self._timeout = timeout
        self._exporter = sdk.OTLPSpanExporter(endpoint=self.endpoint, timeout=timeout, headers=headers,
                                              session=_no_redirects_session())

    def send(self, spans: Sequence[SpanSpec]) -> None:
        """Export `spans` in one request (the SDK retries transient failures within its timeout)."""
        if not spans:
            return
        _HANDLER.local.messages = messages = []
        try:
            result = self._exporter.export([_readable(s, self._resource, self._scope) for s in spans])
        finally:
            _HANDLER.local.messages = None
        if result.name != "SUCCESS":
            why = (_unreachable(self.endpoint, self._timeout) or " — ".join(dict.fromkeys(messages[-1:] + messages[:1]))
                   or "the collector did not accept the spans")
            raise ExportError(f"OTLP export to {self.endpoint} failed: {why}")

    def close(self) -> None:
        self._exporter.shutdown()


def _no_redirects_session():
    """The exporter's HTTP session: it follows no redirect (docs/security.md, "Redirects"), so the spans go to
    the configured endpoint or nowhere; a 3xx fails the export."""
    import requests  # the OTLP exporter's own HTTP stack

    session = requests.Session()
    session.max_redirects = 0
    return session


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None  # the 3xx is raised as an HTTPError instead of being followed


def _open(request: urllib.request.Request, timeout: float):
    """`urlopen` that follows no redirect (docs/security.md, "Redirects")."""
    return urllib.request.build_opener(_NoRedirects).open(request, timeout=timeout)


def _unreachable(endpoint: str, timeout: float) -> str | None:
    """Why the endpoint cannot be connected to ("connection refused", …), or None when it can: the SDK
    names the cause only when it had time left to retry."""
    parts = urlsplit(endpoint)
    try:
        with socket.create_connection((parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)),
                                      timeout=min(timeout, 2.0)):
            return None
    except OSError as exc:
        return f"cannot connect to {parts.netloc}: {exc.strerror or exc}"


def batches(turns: Iterable[TurnRows], project: str = DEFAULT_PROJECT,
            max_spans: int = BATCH_SPANS) -> Iterable[list[tuple[str, list[SpanSpec]]]]:
    """Group turns into requests of at most `max_spans` spans (a turn is never split): (turn_id, its spans)."""
    group: list[tuple[str, list[SpanSpec]]] = []
    size = 0
    for t in turns:
        these = turn_spans(t, project)
        if group and size + len(these) > max_spans:
            yield group
            group, size = [], 0
        group.append((t.turn["turn_id"], these))
        size += len(these)
    if group:
        yield group


def export_turns(turns: Iterable[TurnRows], endpoint: str, *, project: str = DEFAULT_PROJECT,
                 timeout: float = DEFAULT_TIMEOUT_S, annotate: bool = False) -> ExportResult:
    """Replay stored turns as OpenInference spans; with `annotate`, also log the consulted flags in Phoenix.

    Raises ExportError naming the endpoint and the cause when a request fails; the turns sent before
    it are in the collector (sending them again is harmless: span ids are deterministic)."""
    sender = SpanSender(endpoint, project=project, timeout=timeout)
    result = ExportResult(sender.endpoint, sender.project)
    try:
        for group in batches(turns, sender.project):
            spans = [s for _, these in group for s in these]
            sender.send(spans)
            result.turns += len(group)
            result.spans += len(spans)
            if annotate:
                result.annotations += annotate_phoenix(group, base_url(endpoint), timeout=timeout)
    except ExportError as exc:
        raise ExportError(f"{exc} ({result.turns} turns exported before the failure)") from None
    finally:
        sender.close()
    return result


def consulted_annotations(turn_id: str, spans: Iterable[SpanSpec]) -> list[dict[str, Any]]:
    """A Phoenix document annotation `consulted` (score 1/0) for every document of the turn's RETRIEVER spans."""
    out = []
    for span in spans:
        if span.kind != "RETRIEVER":
            continue
        i = 0
        while (doc_id := span.attributes.get(f"retrieval.documents.{i}.document.id")) is not None:
            meta = json.loads(span.attributes[f"retrieval.documents.{i}.document.metadata"])
            out.append({"span_id": f"{span.span_id:016x}", "document_position": i, "name": "consulted",
                        "annotator_kind": "CODE",
                        "result": {"score": 1.0 if meta["consulted"] else 0.0,
                                   "label": "consulted" if meta["consulted"] else "not consulted",
                                   "explanation": meta.get("reason") or ""},
                        "metadata": {"doc_id": doc_id, "turn_id": turn_id}})
            i += 1
    return out


def annotate_phoenix(turns: Iterable[tuple[str, list[SpanSpec]]], base: str, *,
                     timeout: float = DEFAULT_TIMEOUT_S) -> int:
    """POST every consulted flag of these turns' spans ((turn_id, spans) as `batches` groups them) to Phoenix's
    `/v1/document_annotations`; return how many were sent.

    Phoenix queues them and waits for spans that have not been stored yet, so this may follow the span
    export at once; the same annotation posted again replaces the old one (same name, span, position)."""
    data = [a for turn_id, spans in turns for a in consulted_annotations(turn_id, spans)]
    if not data:
        return 0
    request = urllib.request.Request(f"{base}/v1/document_annotations", data=json.dumps({"data": data}).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    try:
        with _open(request, timeout) as response:
            response.read()
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace")[:300]
        raise ExportError(f"Phoenix at {base} refused the document annotations ({exc.code}): {detail}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ExportError(f"cannot reach Phoenix at {base} to annotate documents: {reason}") from None
    return len(data)


__all__ = ["ExportError", "ExportResult", "SpanSender", "annotate_phoenix", "export_turns", "traces_endpoint"]
