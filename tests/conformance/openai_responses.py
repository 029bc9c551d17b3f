"""The openai client on the Responses API (function_call items, function_call_output inputs), instrumented by
OpenInference's `OpenAIInstrumentor`; the history is re-sent as input items."""

import json

import kit
import openai
from openinference.instrumentation.openai import OpenAIInstrumentor

TOOLS = [{"type": "function", "name": "search_help_center", "description": "Search the help center.",
          "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}},
         {"type": "function", "name": "open_article", "description": "Open an article in full.",
          "parameters": {"type": "object", "properties": {"doc_id": {"type": "string"}}, "required": ["doc_id"]}}]


def run_tool(name: str, args: dict) -> str:
    return json.dumps(kit.search(args["query"])) if name == "search_help_center" else kit.open_article(args["doc_id"])


def new_chat():
    client = openai.OpenAI(base_url=kit.MODEL_URL + "/v1", api_key="sk-test", max_retries=0)
    items: list = []

    def ask(question: str) -> str:
        items.append({"role": "user", "content": question})
        while True:
            reply = client.responses.create(model="gpt-4.1-mini", instructions=kit.SYSTEM, input=items, tools=TOOLS)
            items.extend(o.model_dump(exclude_none=True) for o in reply.output)
            calls = [o for o in reply.output if o.type == "function_call"]
            if not calls:
                return reply.output_text
            items.extend({"type": "function_call_output", "call_id": c.call_id,
                          "output": run_tool(c.name, json.loads(c.arguments))} for c in calls)
    return ask


def instrument(provider):
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    return instrumentor


if __name__ == "__main__":
    kit.main("conformance-openai-responses", instrument, new_chat)
