"""The bare openai client in a tool loop, instrumented by OpenLLMetry's `opentelemetry-instrumentation-openai` (the
OTel GenAI conventions), each turn in the app's span naming the conversation (`gen_ai.conversation.id`)."""

import kit
from openai_chat import new_chat
from opentelemetry.instrumentation.openai import OpenAIInstrumentor


def instrument(provider):
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    return instrumentor


if __name__ == "__main__":
    kit.main("conformance-openllmetry-openai", instrument, new_chat, hide_env="TRACELOOP_TRACE_CONTENT",
             session_cm=kit.genai_conversation)
