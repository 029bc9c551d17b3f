"""The OpenAI Agents SDK (Responses API) with two function tools, the conversation re-sent with `to_input_list()`;
instrumented by OpenInference's `OpenAIAgentsInstrumentor` (the SDK's own trace export to OpenAI is turned off)."""

import json

import kit
from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_trace_processors
from openai import AsyncOpenAI
from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor


@function_tool
def search_help_center(query: str) -> str:
    """Search the help center."""
    return json.dumps(kit.search(query))


@function_tool
def open_article(doc_id: str) -> str:
    """Open an article in full."""
    return kit.open_article(doc_id)


def new_chat():
    client = AsyncOpenAI(base_url=kit.MODEL_URL + "/v1", api_key="sk-test", max_retries=0)
    agent = Agent(name="Help center", instructions=kit.SYSTEM, tools=[search_help_center, open_article],
                  model=OpenAIResponsesModel(model="gpt-4.1-mini", openai_client=client))
    history: list = []

    def ask(question: str) -> str:
        result = Runner.run_sync(agent, history + [{"role": "user", "content": question}])
        history[:] = result.to_input_list()
        return result.final_output
    return ask


def instrument(provider):
    set_trace_processors([])  # no export to OpenAI's trace backend: the instrumentor's processor only
    instrumentor = OpenAIAgentsInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    return instrumentor


if __name__ == "__main__":
    kit.main("conformance-openai-agents", instrument, new_chat)
