"""A llama-index `FunctionAgent` with two tools (search, open an article), its conversation kept in a workflow
`Context`; instrumented by OpenInference's `LlamaIndexInstrumentor`."""

import asyncio
import json

import kit
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.workflow import Context
from llama_index.llms.openai import OpenAI
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor


def search_help_center(query: str) -> str:
    """Search the help center."""
    return json.dumps(kit.search(query))


def open_article(doc_id: str) -> str:
    """Open an article in full."""
    return kit.open_article(doc_id)


def new_chat():
    llm = OpenAI(model="gpt-4o-mini", api_base=kit.MODEL_URL + "/v1", api_key="sk-test", max_retries=0)
    agent = FunctionAgent(tools=[search_help_center, open_article], llm=llm, system_prompt=kit.SYSTEM, streaming=False)
    ctx = Context(agent)
    loop = asyncio.new_event_loop()  # one loop per conversation: the async client's connections live in it

    async def run(question: str) -> str:
        return str(await agent.run(question, ctx=ctx))
    return lambda question: loop.run_until_complete(run(question))


def instrument(provider):
    instrumentor = LlamaIndexInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    return instrumentor


if __name__ == "__main__":
    kit.main("conformance-llama-index-agent", instrument, new_chat)
