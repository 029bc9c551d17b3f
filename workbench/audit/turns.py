"""Which traces are turns, and what their model calls saw and said (docs/design.md §12 *Turn*).

A model call is a leaf `LLM` span (an instrumented wrapper may nest one LLM span inside another: the innermost
is the call that went over the wire). A trace whose last model call answers (text, no tool call) is a turn; a
trace with no model call (indexing, embedding) or whose last call asks for tools is not. A bare instrumented
client (each call its own trace) thus gives one turn per answering call, and that call's input messages hold
the tool-calling steps before it, which become the turn's tool calls.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .sessions import conversation_key
from .spans import CUT_MARK, Span

REDACTED = "__REDACTED__"
_MESSAGE_KEY = re.compile(r"^llm\.(input|output)_messages\.(\d+)\.message\.(.+)$")


@dataclass(frozen=True, slots=True)
class ToolRequest:
    """One tool call a model asked for (an assistant message's `tool_calls`)."""

    name: str
    arguments: str
    call_id: str | None = None


@dataclass(frozen=True, slots=True)
class Message:
    role: str
    content: str | None
    index: int
    tool_calls: tuple[ToolRequest, ...] = ()
    tool_call_id: str | None = None


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One call to a model: its span, input messages, output, and why its input cannot be read (or None)."""

    span: Span
    inputs: tuple[Message, ...]
    answer: str | None
    requests: tuple[ToolRequest, ...]
    hidden: str | None

    @property
    def answers(self) -> bool:
        return not self.requests and bool(self.answer)


def messages(span: Span, direction: str) -> list[Message]:
    """The span's `llm.<direction>_messages.*` as messages, in index order (multi-part text joined)."""
    fields: dict[int, dict[str, Any]] = {}
    for key, value in span.attributes.items():
        m = _MESSAGE_KEY.match(key)
        if m and m.group(1) == direction:
            fields.setdefault(int(m.group(2)), {})[m.group(3)] = value
    out = []
    for i in sorted(fields):
        f = fields[i]
        content = f.get("content")
        if content is None:
            parts = [v for k, v in sorted(f.items()) if k.startswith("contents.") and k.endswith("message_content.text")]
            content = "\n".join(str(p) for p in parts) if parts else None
        out.append(Message(role=str(f.get("role", "")), content=None if content is None else str(content), index=i,
                           tool_calls=_requests(f), tool_call_id=f.get("tool_call_id")))
    return out


def _requests(f: dict[str, Any]) -> tuple[ToolRequest, ...]:
    calls: dict[int, dict[str, Any]] = {}
    for key, value in f.items():
        m = re.match(r"^tool_calls\.(\d+)\.tool_call\.(.+)$", key)
        if m:
            calls.setdefault(int(m.group(1)), {})[m.group(2)] = value
    return tuple(ToolRequest(name=str(c.get("function.name", "")), arguments=str(c.get("function.arguments", "")),
                             call_id=c.get("id")) for _, c in sorted(calls.items()))


def _hidden(span: Span, inputs: list[Message]) -> str | None:
    """Why this call's input cannot be audited: hidden, missing or cut (None when it can)."""
    if span.dropped_attributes:
        return f"a span attribute limit dropped {span.dropped_attributes} attributes of model call {span.name!r}"
    cut = [k for k in span.cut if k.startswith(("llm.input_messages.", "input.value"))]
    if cut:
        return f"model input attribute {cut[0]} is over the workbench's size bound ({CUT_MARK})"
    if span.attributes.get("input.value") == REDACTED or any(m.content == REDACTED for m in inputs):
        return "model inputs are hidden (__REDACTED__: the app sets OPENINFERENCE_HIDE_INPUTS or a HIDE_INPUT_* option)"
    if not inputs:
        return f"model call {span.name!r} records no input messages"
    return None


def model_calls(spans: list[Span]) -> list[ModelCall]:
    """The trace's model calls (leaf LLM spans), in start order."""
    llm = [s for s in spans if s.kind == "LLM"]
    parents = {s.parent_id for s in llm}
    calls = []
    for s in sorted((s for s in llm if s.span_id not in parents), key=lambda s: (s.start_ns, s.end_ns)):
        inputs = messages(s, "input")
        outputs = messages(s, "output")
        answer = next((m.content for m in reversed(outputs) if m.content), None)
        if answer is None and not outputs:
            value = s.attributes.get("output.value")
            answer = value if isinstance(value, str) and s.attributes.get("output.mime_type") != "application/json" else None
        requests = tuple(r for m in outputs for r in m.tool_calls)
        calls.append(ModelCall(span=s, inputs=tuple(inputs), answer=answer, requests=requests, hidden=_hidden(s, inputs)))
    return calls


def root_of(spans: list[Span]) -> Span | None:
    """The trace's root span (no parent), or None while it has not arrived."""
    return next((s for s in spans if s.parent_id is None), None)


def question_of(spans: list[Span], final: ModelCall) -> str:
    """The question: the root span's plain-text input (an app's query), else the final call's last user message."""
    root = root_of(spans)
    if root is not None and root.kind != "LLM":
        value = root.attributes.get("input.value")
        if isinstance(value, str) and value != REDACTED and root.attributes.get("input.mime_type") != "application/json":
            return value
    last_user = next((m for m in reversed(final.inputs) if m.role == "user" and m.content), None)
    return "" if last_user is None or last_user.content == REDACTED else last_user.content


def session_of(spans: list[Span]) -> str | None:
    """The audited conversation the trace is a turn of: its service's `session.id` as `conversation_key` keys it
    (None: no session, a turn on its own). The one place a span's session becomes a stored conversation id."""
    session = next((s.attributes["session.id"] for s in spans if isinstance(s.attributes.get("session.id"), str)), None)
    if session is None:
        return None
    return conversation_key(next((s.service for s in spans if s.service), None), session)


def current_from(inputs: tuple[Message, ...]) -> int:
    """Index (into `inputs`) where this turn's own part of the prompt starts: its last user message. Earlier
    messages other than system prompts are earlier turns of the conversation, in context."""
    for i in range(len(inputs) - 1, -1, -1):
        if inputs[i].role == "user":
            return i
    return 0
