"""A pydantic-ai `Agent` with two tools, its history passed back as `message_history`; its own OpenTelemetry
instrumentation (`Agent.instrument_all`) mapped to OpenInference by `OpenInferenceSpanProcessor`."""

import json
import os

import kit
from openinference.instrumentation.pydantic_ai import OpenInferenceSpanProcessor
from pydantic_ai import Agent
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider


def search_help_center(query: str) -> str:
    """Search the help center."""
    return json.dumps(kit.search(query))


def open_article(doc_id: str) -> str:
    """Open an article in full."""
    return kit.open_article(doc_id)


def new_chat():
    model = OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(base_url=kit.MODEL_URL + "/v1", api_key="sk-test"))
    agent = Agent(model, instructions=kit.SYSTEM, tools=[search_help_center, open_article])
    history: list = []

    def ask(question: str) -> str:
        result = agent.run_sync(question, message_history=list(history), conversation_id=kit.session_id())
        history[:] = result.all_messages()
        return result.output
    return ask


class Instrumented:
    """pydantic-ai instruments itself; hidden inputs are its `include_content=False`."""

    def __init__(self, provider):
        hidden = os.environ.get("OPENINFERENCE_HIDE_INPUTS") == "true"
        Agent.instrument_all(InstrumentationSettings(tracer_provider=provider, include_content=not hidden))

    def uninstrument(self):
        Agent.instrument_all(False)


if __name__ == "__main__":
    kit.main("conformance-pydantic-ai", Instrumented, new_chat, processors=(OpenInferenceSpanProcessor(),))
