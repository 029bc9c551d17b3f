"""The OpenAI chat-completions wire format as plain dicts, shared by two providers.

`openai` sends it to any OpenAI-compatible server through the official client; `llamacpp` hands the
same request to llama.cpp's server in-process (`xllamacpp.Server.handle_chat_completions` takes and
returns these dicts). No SDK is imported here.

Requests: messages `{"role", "content"}`; an assistant turn that called tools carries `tool_calls:
[{"id", "type": "function", "function": {"name", "arguments": JSON string}}]`, and each result goes
back as `{"role": "tool", "tool_call_id", "content"}`. Tools are `{"type": "function", "function":
{name, description, parameters}}`. Responses: `choices[0].message` (`content`, `tool_calls`),
`choices[0].finish_reason`, `usage.prompt_tokens` / `usage.completion_tokens`, `model`.

Tool-call arguments arrive as a JSON *string*. Arguments that do not parse to an object become a
`ToolRequest` with `args=None` and the raw text: the call has an id, so the loop can answer it with a
tool error the model sees, and the turn goes on (docs/providers.md, "Malformed tool calls").
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import ProviderError
from ..types import ModelCall
from .base import ModelStep, ToolRequest
from .options import REPRODUCIBLE

#: What a forced step is called in `response_format` (servers require a name).
SCHEMA_NAME = "workbench_step"
#: The output token limit per model call of both providers, when their `max_tokens` option is unset.
MAX_TOKENS_ENV = "WORKBENCH_PROVIDER_MAX_TOKENS"


#: The largest output token limit per model call, and the range of `temperature` and `seed` (llama.cpp's
#: seed is an unsigned 32-bit number; OpenAI's temperature runs from 0 to 2).
MAX_OUTPUT_TOKENS, MAX_TEMPERATURE, MAX_SEED = 32768, 2.0, 2**32 - 1


def sampling_options(max_tokens_default: str, temperature_default: str) -> dict[str, dict[str, Any]]:
    """The `options_schema` properties of the sampling settings both providers send with every request."""
    return {
        "max_tokens": {"type": "integer", "minimum": 1, "maximum": MAX_OUTPUT_TOKENS, "title": "Max tokens",
                       "description": f"output token limit per model call (default ${MAX_TOKENS_ENV}, else "
                                      f"{max_tokens_default})"},
        "temperature": {"type": "number", "minimum": 0, "maximum": MAX_TEMPERATURE, "title": "Temperature",
                        "description": f"default {temperature_default}", REPRODUCIBLE: 0.0},
        "seed": {"type": "integer", "minimum": 0, "maximum": MAX_SEED, "title": "Seed", "description": "sampling seed (default: none)", REPRODUCIBLE: 0},
    }


def to_openai_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Provider-neutral messages (see `base`) in the chat-completions shape."""
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m["role"]
        if role == "tool":
            out.append({"role": "tool", "tool_call_id": m.get("tool_call_id") or "", "content": m.get("content") or ""})
        elif role == "assistant" and m.get("tool_calls"):
            out.append({"role": "assistant", "content": m.get("content") or None,
                        "tool_calls": [{"id": tc["id"], "type": "function",
                                        "function": {"name": tc["name"],
                                                     "arguments": json.dumps(tc.get("args") or {}, ensure_ascii=False)}}
                                       for tc in m["tool_calls"]]})
        else:
            out.append({"role": role, "content": m.get("content") or ""})
    return out


def to_openai_tools(specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": t["name"], "description": t.get("description", ""),
                                              "parameters": t.get("parameters") or {"type": "object", "properties": {}}}}
            for t in specs]


class ChatCompletions:
    """Mixin for a `Provider` that speaks this format: it builds both requests; the provider sends them
    with its own `_chat(request) -> ModelStep` (over HTTP for `openai`, in-process for `llamacpp`)."""

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelStep:
        return self._chat(chat_request(messages, tools))

    def complete_json(self, messages: list[dict[str, Any]], schema: dict[str, Any]) -> ModelStep:
        return self._chat(json_request(messages, schema))

    def _chat(self, request: dict[str, Any]) -> ModelStep:
        raise NotImplementedError


def chat_request(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The request body of `Provider.complete` (tools only when there are any: excerpt mode sends none)."""
    request: dict[str, Any] = {"messages": to_openai_messages(messages)}
    if tools:
        request["tools"] = to_openai_tools(tools)
    return request


def json_request(messages: list[dict[str, Any]], schema: dict[str, Any]) -> dict[str, Any]:
    """The request body of `Provider.complete_json`: output forced to `schema`, no tools."""
    return {"messages": to_openai_messages(messages), "response_format": json_schema_format(schema)}


def json_schema_format(schema: dict[str, Any]) -> dict[str, Any]:
    """`response_format` forcing output to `schema`.

    Not `strict`: OpenAI's strict mode rejects a root `anyOf`, which is the natural shape of "one of
    these actions". Servers that compile the schema into a grammar (llama.cpp, vLLM) enforce it all
    the same; elsewhere a step that does not match is reported by the json-steps protocol.
    """
    return {"type": "json_schema", "json_schema": {"name": SCHEMA_NAME, "schema": schema, "strict": False}}


def parse_completion(body: dict[str, Any], provider: str, model: str | None, latency_ms: float, retries: int,
                     new_id) -> ModelStep:
    """One chat-completion response as a `ModelStep`; `new_id()` names a tool call the server left unnamed."""
    choices = body.get("choices") or []
    usage = body.get("usage") or {}
    if not choices:
        raise ProviderError(f"the server returned no choices: {json.dumps(body)[:300]}", status="provider_error")
    choice = choices[0]
    message = choice.get("message") or {}
    call = ModelCall(provider, model, round(latency_ms, 3), usage.get("prompt_tokens"), usage.get("completion_tokens"),
                     choice.get("finish_reason"), body.get("model"), retries)
    requests = []
    for tc in message.get("tool_calls") or ():
        fn = tc.get("function") or {}
        raw = fn.get("arguments")
        args = _object_or_none(raw)
        requests.append(ToolRequest(tc.get("id") or new_id(), fn.get("name") or "", args,
                                    None if args is not None else (raw if isinstance(raw, str) else json.dumps(raw))))
    return ModelStep(message.get("content") or "", tuple(requests), call)


def _object_or_none(raw: Any) -> dict[str, Any] | None:
    if isinstance(raw, dict):
        return raw
    if raw is None or raw == "":
        return {}  # a tool without parameters
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def error_detail(body: Any) -> tuple[str, str]:
    """(type or code, message) from an error body `{"error": {"message", "type", "code"}}` (or anything else)."""
    err = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(err, dict):
        kind = str(err.get("type") or err.get("code") or "")
        return kind, str(err.get("message") or json.dumps(err))[:300]
    return "", str(err)[:300]
