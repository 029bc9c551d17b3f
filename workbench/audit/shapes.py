"""What reached a model and what it said, from every shape the instrumentors write (docs/design.md §12, *Every
shape the instrumentors write*), as ONE internal shape: a tuple of `Message`s (role, text, the tool calls an
assistant message asks for, the tool-call id a tool result answers). The rules read only that shape.

Readers (the one whose reading holds the most wins, the first on a tie):
- OpenInference: `llm.<input|output>_messages.N.message.content`, or its parts
  `.message.contents.M.message_content.text`, `tool_calls.K.tool_call.*`, `tool_call_id`;
- the OTel GenAI conventions: `gen_ai.input.messages` / `gen_ai.output.messages` (JSON, messages of `parts`) with
  `gen_ai.system_instructions`, then the older indexed `gen_ai.prompt.N.*` / `gen_ai.completion.N.*`;
- a request or response body in `input.value` / `output.value`: chat completions (`messages`, `choices`), the
  Responses API (`input` items incl. `function_call` / `function_call_output`, `instructions`, `output`),
  Anthropic (`system`, content blocks incl. `tool_use` / `tool_result`), Gemini (`contents` / `candidates` with
  `functionCall` / `functionResponse` parts, `systemInstruction`).
A tool result inside another message (an Anthropic `tool_result` block, a Gemini `functionResponse` part) becomes
a message of role `tool` of its own, so every shape gives tool results the same way.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Iterator

from .spans import Span

_OI_KEY = re.compile(r"^llm\.(input|output)_messages\.(\d+)\.message\.(.+)$")
_OI_CALL = re.compile(r"^tool_calls\.(\d+)\.tool_call\.(.+)$")
_GENAI_OLD_KEY = re.compile(r"^gen_ai\.(prompt|completion)\.(\d+)\.(.+)$")
_GENAI_OLD_CALL = re.compile(r"^tool_calls\.(\d+)\.(.+)$")
_TEXT_PARTS = ("text", "input_text", "output_text", "refusal")
_MAX_MESSAGES = 10_000


@dataclass(frozen=True, slots=True)
class SpanToolRequest:
    """One tool call a model asked for: its name, the arguments the model sent (JSON text), its tool-call id."""

    name: str
    arguments: str
    call_id: str | None = None

    @property
    def args(self) -> dict[str, Any]:
        return tool_args(self.arguments)


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a model input or output, whatever shape it was written in."""

    role: str
    content: str | None
    index: int
    tool_calls: tuple[SpanToolRequest, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None  # the tool a `tool` message answers, when it says (OpenInference `message.name`)


def tool_args(arguments: Any) -> dict[str, Any]:
    """A tool call's arguments as an object: JSON text parsed; `{}` when there are none; anything else kept whole
    under `arguments` (never guessed at)."""
    if isinstance(arguments, dict):
        return arguments
    if arguments in (None, ""):
        return {}
    try:
        data = json.loads(arguments) if isinstance(arguments, str) else arguments
    except (ValueError, RecursionError):
        return {"arguments": arguments}
    return data if isinstance(data, dict) else {"arguments": data}


def read_messages(span: Span, direction: str) -> list[Message]:
    """The span's input (`direction` "input") or output ("output") messages: of the shapes it is written in, the
    one that holds the most (an instrumentor may list the messages but leave out what it cannot flatten, such as
    an Anthropic `tool_result` block, while the request body it also records holds them); on a tie the first of
    OpenInference, GenAI messages, GenAI indexed attributes, the body."""
    best: list[Message] = []
    for reader in (_openinference, _genai, _genai_indexed, _body):
        found = reader(span, direction)
        if _held(found) > _held(best):
            best = found
    return best[:_MAX_MESSAGES]


def _held(messages: list[Message]) -> int:
    """How much a reading holds: its text, and its tool calls' names and arguments."""
    return sum(len(m.content or "") + sum(len(r.name) + len(r.arguments) for r in m.tool_calls) for m in messages) \
        + len(messages)


# --- OpenInference -------------------------------------------------------------------------------------------


def _indexed(span: Span, pattern: re.Pattern, want: str) -> list[tuple[int, dict[str, Any]]]:
    """The span's attributes `<prefix>.<want>.N.<rest>` (as `pattern` reads them) by N: (N, {rest: value})."""
    fields: dict[int, dict[str, Any]] = {}
    for key, value in span.attributes.items():
        m = pattern.match(key)
        if m and m.group(1) == want:
            fields.setdefault(int(m.group(2)), {})[m.group(3)] = value
    return sorted(fields.items())


def _openinference(span: Span, direction: str) -> list[Message]:
    out = []
    for i, f in _indexed(span, _OI_KEY, direction):
        content = f.get("content")
        if content is None:
            parts = [v for k, v in sorted(f.items(), key=lambda kv: _part_order(kv[0]))
                     if k.startswith("contents.") and k.endswith("message_content.text")]
            content = "\n".join(str(p) for p in parts) if parts else None
        out.append(Message(role=str(f.get("role", "")), content=None if content is None else str(content), index=i,
                           tool_calls=_indexed_calls(f, _OI_CALL, "function.name", "function.arguments", "id"),
                           tool_call_id=_str(f.get("tool_call_id")), name=_str(f.get("name"))))
    return out


def _part_order(key: str) -> tuple[int, str]:
    m = re.match(r"^contents\.(\d+)\.", key)
    return (int(m.group(1)) if m else 0, key)


def _indexed_calls(f: dict[str, Any], pattern: re.Pattern, name: str, arguments: str, call_id: str
                   ) -> tuple[SpanToolRequest, ...]:
    calls: dict[int, dict[str, Any]] = {}
    for key, value in f.items():
        m = pattern.match(key)
        if m:
            calls.setdefault(int(m.group(1)), {})[m.group(2)] = value
    return tuple(SpanToolRequest(name=str(c.get(name, "")), arguments=_text_of_args(c.get(arguments)),
                             call_id=_str(c.get(call_id))) for _, c in sorted(calls.items()))


# --- OTel GenAI conventions ----------------------------------------------------------------------------------


def _genai(span: Span, direction: str) -> list[Message]:
    """`gen_ai.<direction>.messages` (or a whole prompt or completion as JSON in `gen_ai.prompt` /
    `gen_ai.completion`, as some SDKs write it): messages of `parts`, or chat-completions messages."""
    data = _json(span.attributes.get(f"gen_ai.{direction}.messages"))
    if not isinstance(data, list):
        data = _json(span.attributes.get("gen_ai.prompt" if direction == "input" else "gen_ai.completion"))
    if not isinstance(data, list):
        return []
    out: list[Message] = []
    if direction == "input":
        system = _json(span.attributes.get("gen_ai.system_instructions"))
        text = _parts_text(system if isinstance(system, list) else [system]) if system else None
        if text:
            out.append(Message(role="system", content=text, index=0))
    for m in data:
        if isinstance(m, dict) and "parts" in m:
            out.extend(_from_parts(str(m.get("role", "")), m.get("parts") or [], len(out)))
        elif isinstance(m, dict):
            out.extend(_item(str(m.get("role", "")), m, len(out)))
    return out


def _from_parts(role: str, parts: list[Any], index: int) -> list[Message]:
    """A GenAI message of parts: its text, its tool calls, and each tool-call response as a `tool` message."""
    texts, calls, results = [], [], []
    for p in parts if isinstance(parts, list) else [parts]:
        if isinstance(p, str):
            texts.append(p)
        elif not isinstance(p, dict):
            continue
        elif p.get("type") == "tool_call":
            calls.append(SpanToolRequest(name=str(p.get("name", "")), arguments=_text_of_args(p.get("arguments")),
                                     call_id=_str(p.get("id"))))
        elif p.get("type") == "tool_call_response":
            results.append((_str(p.get("id")), _result_text(p.get("response", p.get("result")))))
        elif isinstance(p.get("content"), str):
            texts.append(p["content"])
        elif isinstance(p.get("text"), str):
            texts.append(p["text"])
    return _assembled(role, texts, calls, results, index)


def _assembled(role: str, texts: list[str], calls: list[SpanToolRequest], results: list[tuple[str | None, str]],
               index: int) -> list[Message]:
    out = []
    if role == "tool" and len(results) == 0 and texts:
        return [Message(role="tool", content="\n".join(texts), index=index)]
    for call_id, text in results:
        out.append(Message(role="tool", content=text, index=index + len(out), tool_call_id=call_id))
    if texts or calls or not results:
        out.append(Message(role=_role(role), content="\n".join(texts) if texts else None, index=index + len(out),
                           tool_calls=tuple(calls)))
    return out


def _genai_indexed(span: Span, direction: str) -> list[Message]:
    want = "prompt" if direction == "input" else "completion"
    out = []
    for i, f in _indexed(span, _GENAI_OLD_KEY, want):
        content = f.get("content")
        if isinstance(content, str) and content.startswith("[{"):  # some write a list of typed parts as JSON
            parts = _json(content)
            if isinstance(parts, list) and parts and all(isinstance(p, dict) and "type" in p for p in parts):
                content = _parts_text(parts)
        out.append(Message(role=_role(str(f.get("role", "assistant" if want == "completion" else ""))),
                           content=None if content is None else str(content), index=i,
                           tool_calls=_indexed_calls(f, _GENAI_OLD_CALL, "name", "arguments", "id"),
                           tool_call_id=_str(f.get("tool_call_id"))))
    return out


# --- request and response bodies -----------------------------------------------------------------------------


def _body(span: Span, direction: str) -> list[Message]:
    data = _json(span.attributes.get(f"{direction}.value"))
    if not isinstance(data, dict):
        return []
    items = list(_request_items(data) if direction == "input" else _response_items(data))
    out: list[Message] = []
    for role, content in items:
        out.extend(_item(role, content, len(out)))
    return out


def _request_items(data: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(role, content) of a request body: chat completions, Responses, Anthropic or Gemini."""
    for key in ("instructions", "system"):
        if data.get(key):
            yield "system", data[key]
    config = data.get("config") if isinstance(data.get("config"), dict) else {}
    gemini_system = data.get("systemInstruction") or data.get("system_instruction") or config.get("system_instruction")
    if gemini_system:
        yield "system", gemini_system.get("parts", gemini_system) if isinstance(gemini_system, dict) else gemini_system
    if isinstance(data.get("messages"), list):
        for m in data["messages"]:
            if isinstance(m, dict):
                yield str(m.get("role", "")), m
    if isinstance(data.get("input"), str):
        yield "user", data["input"]
    elif isinstance(data.get("input"), list):
        for m in data["input"]:
            if isinstance(m, dict):
                yield str(m.get("role", "")), m
    contents = data.get("contents")
    if isinstance(contents, str):
        yield "user", contents
    elif isinstance(contents, list):
        for m in contents:
            if isinstance(m, dict):
                yield str(m.get("role", "user")), m
            elif isinstance(m, str):
                yield "user", m


def _response_items(data: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    for choice in data.get("choices") or ():
        if isinstance(choice, dict) and isinstance(choice.get("message"), dict):
            yield "assistant", choice["message"]
    for item in data.get("output") or () if isinstance(data.get("output"), list) else ():
        if isinstance(item, dict):
            yield str(item.get("role", "assistant")), item
    if data.get("type") == "message" and isinstance(data.get("content"), list):  # Anthropic's response
        yield "assistant", {"content": data["content"]}
    for cand in data.get("candidates") or ():
        if isinstance(cand, dict) and isinstance(cand.get("content"), dict):
            yield "model", cand["content"]


def _item(role: str, m: Any, index: int) -> list[Message]:
    """One message or item of a body as messages (its tool results, then itself)."""
    if not isinstance(m, dict):
        return [Message(role=_role(role), content=_parts_text(m), index=index)]
    kind = m.get("type")
    if kind not in (None, "message", "function_call", "custom_tool_call", "function_call_output",
                    "custom_tool_call_output"):
        return []  # a Responses item that is no message (reasoning, a web search call …)
    if kind in ("function_call", "custom_tool_call"):  # Responses API: a call the model asked for
        call = SpanToolRequest(name=str(m.get("name", "")), arguments=_text_of_args(m.get("arguments", m.get("input"))),
                           call_id=_str(m.get("call_id") or m.get("id")))
        return [Message(role="assistant", content=None, index=index, tool_calls=(call,))]
    if kind in ("function_call_output", "custom_tool_call_output"):
        return [Message(role="tool", content=_result_text(m.get("output")), index=index,
                        tool_call_id=_str(m.get("call_id")))]
    texts, calls, results = [], [], []
    for tc in m.get("tool_calls") or ():  # chat completions
        if isinstance(tc, dict):
            fn = tc.get("function") if isinstance(tc.get("function"), dict) else tc
            calls.append(SpanToolRequest(name=str(fn.get("name", "")), arguments=_text_of_args(fn.get("arguments")),
                                     call_id=_str(tc.get("id"))))
    content = m.get("content", m.get("parts"))
    for block in content if isinstance(content, list) else [content]:
        _block(block, texts, calls, results)
    if role == "tool" or m.get("role") == "tool":
        return [Message(role="tool", content="\n".join(texts), index=index, tool_call_id=_str(m.get("tool_call_id")))]
    return _assembled(role, texts, calls, results, index)


def _block(block: Any, texts: list[str], calls: list[SpanToolRequest], results: list[tuple[str | None, str]]) -> None:
    """One content block or part: text, a tool call (Anthropic `tool_use`, Gemini `functionCall`) or a tool result
    (Anthropic `tool_result`, Gemini `functionResponse`)."""
    if isinstance(block, str):
        texts.append(block)
        return
    if not isinstance(block, dict):
        return
    kind = block.get("type")
    call = block.get("functionCall") or block.get("function_call")
    response = block.get("functionResponse") or block.get("function_response")
    if kind == "tool_use":
        calls.append(SpanToolRequest(name=str(block.get("name", "")), arguments=_text_of_args(block.get("input")),
                                 call_id=_str(block.get("id"))))
    elif kind == "tool_result":
        results.append((_str(block.get("tool_use_id")), _result_text(block.get("content"))))
    elif isinstance(call, dict):
        calls.append(SpanToolRequest(name=str(call.get("name", "")), arguments=_text_of_args(call.get("args")),
                                 call_id=_str(call.get("id")) or _str(call.get("name"))))
    elif isinstance(response, dict):
        results.append((_str(response.get("id")) or _str(response.get("name")), _result_text(response.get("response"))))
    elif kind in _TEXT_PARTS or (kind is None and isinstance(block.get("text"), str)):
        texts.append(str(block.get("text", "")))


# --- helpers -----------------------------------------------------------------------------------------------


def _result_text(value: Any) -> str:
    """A tool result as the text the model got: a string as is; a Gemini response object's single `output`,
    `result` or `content`; content blocks' text; anything else as JSON (none: the empty text, as a part whose
    content was not captured)."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, dict) and len(value) == 1 and next(iter(value)) in ("output", "result", "content"):
        return _result_text(next(iter(value.values())))
    if isinstance(value, list) and all(isinstance(b, dict) and b.get("type") in _TEXT_PARTS for b in value):
        return "\n".join(str(b.get("text", "")) for b in value)
    return json.dumps(value, ensure_ascii=False)


def _parts_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    texts: list[str] = []
    for p in value if isinstance(value, list) else [value]:
        if isinstance(p, str):
            texts.append(p)
        elif isinstance(p, dict):
            text = p.get("content") if isinstance(p.get("content"), str) else p.get("text")
            if isinstance(text, str):
                texts.append(text)
    return "\n".join(texts)


def _role(role: str) -> str:
    """Roles as chat completions names them (Gemini's `model` is the assistant; a developer prompt is a system
    prompt)."""
    return {"model": "assistant", "developer": "system"}.get(role, role)


def _text_of_args(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _str(value: Any) -> str | None:
    return str(value) if isinstance(value, (str, int)) and value != "" else None


def _json(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return None
