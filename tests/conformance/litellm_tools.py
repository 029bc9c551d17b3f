"""litellm's `completion` in a tool loop, instrumented by OpenInference's `LiteLLMInstrumentor`."""

import json

import kit
import litellm
from openinference.instrumentation.litellm import LiteLLMInstrumentor
from openai_chat import TOOLS, run_tool


def new_chat():
    messages = [{"role": "system", "content": kit.SYSTEM}]

    def ask(question: str) -> str:
        messages.append({"role": "user", "content": question})
        while True:
            reply = litellm.completion(model="openai/gpt-4o-mini", api_base=kit.MODEL_URL + "/v1", api_key="sk-test",
                                       messages=messages, tools=TOOLS).choices[0].message
            messages.append(reply.model_dump(exclude_none=True))
            if not reply.tool_calls:
                return reply.content
            for call in reply.tool_calls:
                result = run_tool(call.function.name, json.loads(call.function.arguments))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return ask


def instrument(provider):
    instrumentor = LiteLLMInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    return instrumentor


if __name__ == "__main__":
    kit.main("conformance-litellm", instrument, new_chat)
