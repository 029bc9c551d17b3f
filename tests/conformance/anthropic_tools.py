"""The anthropic client with tool_use / tool_result, instrumented by OpenInference's `AnthropicInstrumentor`."""

import json

import anthropic
import kit
from openinference.instrumentation.anthropic import AnthropicInstrumentor

TOOLS = [{"name": "search_help_center", "description": "Search the help center.",
          "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}},
         {"name": "open_article", "description": "Open an article in full.",
          "input_schema": {"type": "object", "properties": {"doc_id": {"type": "string"}}, "required": ["doc_id"]}}]


def run_tool(name: str, args: dict) -> str:
    return json.dumps(kit.search(args["query"])) if name == "search_help_center" else kit.open_article(args["doc_id"])


def new_chat():
    client = anthropic.Anthropic(base_url=kit.MODEL_URL, api_key="sk-ant-test", max_retries=0)
    messages = []

    def ask(question: str) -> str:
        messages.append({"role": "user", "content": question})
        while True:
            reply = client.messages.create(model="claude-sonnet-4-5", max_tokens=1024, system=kit.SYSTEM,
                                           messages=messages, tools=TOOLS)
            messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]})
            uses = [b for b in reply.content if b.type == "tool_use"]
            if not uses:
                return "".join(b.text for b in reply.content if b.type == "text")
            messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": b.id, "content": run_tool(b.name, b.input)} for b in uses]})
    return ask


def instrument(provider):
    instrumentor = AnthropicInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    return instrumentor


if __name__ == "__main__":
    kit.main("conformance-anthropic", instrument, new_chat)
