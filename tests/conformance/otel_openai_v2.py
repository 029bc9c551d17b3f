"""The bare openai client in a tool loop, instrumented by the official OpenTelemetry `opentelemetry-instrumentation-openai-v2`
as its docs show: the spans to `collect`'s /v1/traces, the messages as GenAI log events through the OTel SDK's
`LoggerProvider`, a `BatchLogRecordProcessor` and the `OTLPLogExporter` to its /v1/logs (the spans hold no message: the
audit joins the events to them). Content is captured in events only, `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=
EVENT_ONLY`: with the GenAI utilities it runs on (`opentelemetry-util-genai` 1.x) the instrumentor writes the latest
conventions, one `gen_ai.client.inference.operation.details` record per call holding `gen_ai.input.messages` and
`gen_ai.output.messages` (the older per-message events, `gen_ai.user.message` … `gen_ai.choice`, come from its
releases on `opentelemetry-util-genai` 0.x; both are read: tests/test_audit_logs.py). The hidden run sets it to
`NO_CONTENT` (no event at all). Each turn is in the app's span naming the conversation (`gen_ai.conversation.id`)."""

import os

import kit
from openai_chat import new_chat
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource

CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
LOGS: list[LoggerProvider] = []  # the app's logger provider (made in `__main__`)


def logger_provider() -> LoggerProvider:
    """The OTel SDK's logger provider, exporting OTLP/HTTP protobuf to `collect`'s /v1/logs in batches."""
    provider = LoggerProvider(resource=Resource.create({"service.name": "conformance-otel-openai-v2"}))
    provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter(
        os.environ["CONFORMANCE_COLLECT"].removesuffix("/v1/traces") + "/v1/logs", timeout=30)))
    return provider


def instrument(provider):
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider, logger_provider=LOGS[0])
    return instrumentor


if __name__ == "__main__":
    os.environ.setdefault(CONTENT, "EVENT_ONLY")
    LOGS.append(logger_provider())
    kit.main("conformance-otel-openai-v2", instrument, new_chat, hide_env=CONTENT, hidden_value="NO_CONTENT",
             session_cm=kit.genai_conversation)
    LOGS[0].shutdown()  # its last records sent
