"""The bare openai client in a tool loop, instrumented by the official OpenTelemetry `opentelemetry-instrumentation-openai-v2`
as its docs show: the spans to `collect`'s /v1/traces, the messages as GenAI log events through the OTel SDK's
`LoggerProvider`, a `BatchLogRecordProcessor` and the `OTLPLogExporter` to its /v1/logs (the spans hold no message: the
audit joins the events to them). Content is captured in events only, `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=
EVENT_ONLY`: with the GenAI utilities it runs on (`opentelemetry-util-genai` 1.x) the instrumentor writes the latest
conventions, one `gen_ai.client.inference.operation.details` record per call holding `gen_ai.input.messages` and
`gen_ai.output.messages` (the older per-message events, `gen_ai.user.message` … `gen_ai.choice`, come from its
releases on `opentelemetry-util-genai` 0.x; both are read: tests/test_audit_logs.py). The hidden run sets it to
`NO_CONTENT` (no event at all). With `--legacy`, the instrumentor's own legacy wrapper writes the per-message events
(`instrument_legacy`); its hidden run sets the switch to `false` (events without content). Each turn is in the app's span naming the conversation (`gen_ai.conversation.id`)."""

import os
import sys

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


def instrument_legacy(provider):
    """The instrumentor with its chat wrapper replaced by its own legacy one (`patch.chat_completions_create_v_old`:
    one event per message, `gen_ai.user.message` … `gen_ai.choice`, content when the switch is `true`), the path its
    releases on `opentelemetry-util-genai` 0.x take by default and 1.x never do: the instrumentor's real code, chosen
    by hand."""
    import openai
    from opentelemetry._logs import get_logger
    from opentelemetry.instrumentation.openai_v2 import patch, utils
    from opentelemetry.instrumentation.openai_v2.instruments import Instruments
    from opentelemetry.instrumentation.utils import unwrap
    from opentelemetry.metrics import get_meter
    from opentelemetry.trace import get_tracer
    from wrapt import wrap_function_wrapper

    instrumentor = instrument(provider)
    unwrap(openai.resources.chat.completions.Completions, "create")
    legacy = patch.chat_completions_create_v_old(get_tracer(patch.__name__, "", provider),
                                                 get_logger(patch.__name__, "", logger_provider=LOGS[0]),
                                                 Instruments(get_meter(patch.__name__)), utils.is_content_enabled())
    wrap_function_wrapper("openai.resources.chat.completions", "Completions.create", legacy)
    return instrumentor


if __name__ == "__main__":
    LOGS.append(logger_provider())
    if "--legacy" in sys.argv:
        os.environ.setdefault(CONTENT, "true")
        kit.main("conformance-otel-openai-v2-legacy", instrument_legacy, new_chat, hide_env=CONTENT,
                 hidden_value="false", session_cm=kit.genai_conversation)
    else:
        os.environ.setdefault(CONTENT, "EVENT_ONLY")
        kit.main("conformance-otel-openai-v2", instrument, new_chat, hide_env=CONTENT, hidden_value="NO_CONTENT",
                 session_cm=kit.genai_conversation)
    LOGS[0].shutdown()  # its last records sent
