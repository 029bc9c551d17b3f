"""The bare openai client in a tool loop (chat completions), instrumented by OpenInference's `OpenAIInstrumentor`."""

import json

import kit
import openai
from openinference.instrumentation.openai import OpenAIInstrumentor

TOOLS = [{"type": "function", "function": {"name": "search_help_center", "description": "Search the help center.",
                                           "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                                                          "required": ["query"]}}},
         {"type": "function", "function": {"name": "open_article", "description": "Open an article in full.",
                                           "parameters": {"type": "object", "properties": {"doc_id": {"type": "string"}},
                                                          "required": ["doc_id"]}}}]


def run_tool(name: str, args: dict) -> str:
    if name == "search_help_center":
        return json.dumps(kit.search(args["query"]))
    return kit.open_article(args["doc_id"])


def new_chat():
    client = openai.OpenAI(base_url=kit.MODEL_URL + "/v1", api_key="sk-test", max_retries=0)
    messages = [{"role": "system", "content": kit.SYSTEM}]

    def ask(question: str) -> str:
        messages.append({"role": "user", "content": question})
        while True:
            reply = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS).choices[0].message
            messages.append(reply.model_dump(exclude_none=True))
            if not reply.tool_calls:
                return reply.content
            for call in reply.tool_calls:
                result = run_tool(call.function.name, json.loads(call.function.arguments))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return ask


def instrument(provider):
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    return instrumentor


if __name__ == "__main__":
    kit.main("conformance-openai-chat", instrument, new_chat)
