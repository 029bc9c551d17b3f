"""A LangChain v1 `create_agent` whose search tool returns text (blocks of title, URL and text, as most hand-written
tools and `create_retriever_tool` make them), with a checkpointer keeping the conversation; instrumented by
OpenInference's `LangChainInstrumentor`."""

import sys

import kit
from langchain.agents import create_agent
from langchain.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from openinference.instrumentation.langchain import LangChainInstrumentor

AS_JSON = "--json" in sys.argv


@tool
def search_help_center(query: str) -> str:
    """Search the help center."""
    hits = kit.search(query)
    return kit.json.dumps(hits) if AS_JSON else kit.as_text(hits)


@tool
def open_article(doc_id: str) -> str:
    """Open an article in full."""
    return kit.open_article(doc_id)


def new_chat():
    model = ChatOpenAI(model="gpt-4o-mini", base_url=kit.MODEL_URL + "/v1", api_key="sk-test", max_retries=0)
    agent = create_agent(model, tools=[search_help_center, open_article], system_prompt=kit.SYSTEM,
                         checkpointer=InMemorySaver())

    def ask(question: str) -> str:
        thread = {"configurable": {"thread_id": kit.session_id()}}  # LangGraph's thread is the session
        state = agent.invoke({"messages": [{"role": "user", "content": question}]}, thread)
        return state["messages"][-1].content
    return ask


def instrument(provider):
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    return instrumentor


if __name__ == "__main__":
    kit.main("conformance-langchain-agent" + ("-json" if AS_JSON else ""), instrument, new_chat)
