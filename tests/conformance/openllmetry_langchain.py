"""The LangChain `create_agent` app (text search results), instrumented by OpenLLMetry's
`opentelemetry-instrumentation-langchain` (the OTel GenAI conventions)."""

import kit
from langchain_agent_text import new_chat
from opentelemetry.instrumentation.langchain import LangchainInstrumentor


def instrument(provider):
    instrumentor = LangchainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    return instrumentor


if __name__ == "__main__":
    kit.main("conformance-openllmetry-langchain", instrument, new_chat, hide_env="TRACELOOP_TRACE_CONTENT",
             session_cm=kit.genai_conversation)
