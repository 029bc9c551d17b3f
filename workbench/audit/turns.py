"""Which traces are turns, and what their model calls saw and said (docs/design.md §12 *Turn*).

A model call is a leaf `LLM` span (an instrumented wrapper may nest one LLM span inside another: the innermost
is the call that went over the wire). A trace whose last model call answers (text, no tool call) is a turn; a
trace with no model call (indexing, embedding) or whose last call asks for tools is not. A bare instrumented
client (each call its own trace) thus gives one turn per answering call, and that call's input messages hold
the tool-calling steps before it, which become the turn's tool calls.
"""

from __future__ import annotations

import json

from dataclasses import dataclass

from .sessions import conversation_key
from .shapes import Message, SpanToolRequest, read_messages
from .spans import CUT_MARK, Span

REDACTED = "__REDACTED__"


@dataclass(frozen=True, slots=True)
class SpanCall:
    """One call to a model: its span, input messages, output, and why its input cannot be read (or None)."""

    span: Span
    inputs: tuple[Message, ...]
    answer: str | None
    requests: tuple[SpanToolRequest, ...]
    hidden: str | None

    @property
    def answers(self) -> bool:
        return not self.requests and bool(self.answer)


def _hidden(span: Span, inputs: list[Message]) -> str | None:
    """Why this call's input cannot be audited: hidden, missing or cut (None when it can)."""
    if span.dropped_attributes:
        return f"a span attribute limit dropped {span.dropped_attributes} attributes of model call {span.name!r}"
    cut = [k for k in span.cut if k.startswith(("llm.input_messages.", "input.value", "gen_ai.input.messages",
                                                 "gen_ai.prompt."))]
    if cut:
        return f"model input attribute {cut[0]} is over the workbench's size bound ({CUT_MARK})"
    if span.attributes.get("input.value") == REDACTED or any(m.content == REDACTED for m in inputs):
        return "model inputs are hidden (__REDACTED__: the app sets OPENINFERENCE_HIDE_INPUTS or a HIDE_INPUT_* option)"
    if not inputs:
        return _NO_INPUT.format(span.name)
    if not any(m.content for m in inputs):
        return (f"model call {span.name!r} records its messages without their text (content capture is off: "
                "pydantic-ai `include_content=False`, `TRACELOOP_TRACE_CONTENT=false`)")
    return None


def hidden_turn(calls: list[SpanCall]) -> bool:
    """Whether model calls that end in no answer and no tool call are a turn whose content is hidden (every call's
    input hidden, missing or without text: the instrumentation captures no content): an unauditable turn."""
    return bool(calls) and not calls[-1].requests and not calls[-1].answer and all(c.hidden for c in calls)


def model_calls(spans: list[Span]) -> list[SpanCall]:
    """The trace's model calls (leaf LLM spans), in start order. An LLM span that records no request (no input
    messages, no answer, no tool call: a framework's helper step such as llama-index's
    `OpenAI._prepare_chat_with_tools`) is no model call when others are; one whose input is hidden or cut is."""
    calls = _leaf_calls(spans)
    real = [c for c in calls if c.inputs or c.answer or c.requests or c.hidden != _NO_INPUT.format(c.span.name)]
    return real or calls


_NO_INPUT = "model call {!r} records no input messages"


def _leaf_calls(spans: list[Span]) -> list[SpanCall]:
    llm = [s for s in spans if s.kind == "LLM"]
    parents = {s.parent_id for s in llm}
    calls = []
    for s in sorted((s for s in llm if s.span_id not in parents), key=lambda s: (s.start_ns, s.end_ns)):
        inputs = read_messages(s, "input")
        outputs = read_messages(s, "output")
        answer = next((m.content for m in reversed(outputs) if m.content), None)
        if answer is None and not outputs:
            value = s.attributes.get("output.value")
            answer = value if isinstance(value, str) and s.attributes.get("output.mime_type") != "application/json" else None
        requests = tuple(r for m in outputs for r in m.tool_calls)
        calls.append(SpanCall(span=s, inputs=tuple(inputs), answer=answer, requests=requests, hidden=_hidden(s, inputs)))
    return calls


def root_of(spans: list[Span]) -> Span | None:
    """The trace's root span (no parent), or None while it has not arrived."""
    return next((s for s in spans if s.parent_id is None), None)


#: The keys under which a chain's JSON input holds the user's question (LangChain LCEL `{"question": …}`,
#: AgentExecutor `{"input": …}`), in the order they are tried.
_QUESTION_KEYS = ("question", "query", "input", "user_input", "message")


def question_of(spans: list[Span], final: SpanCall) -> str:
    """The question: the root span's plain-text input (an app's query), or the text under a question key of its
    JSON input (a chain's variables: its prompt template wraps the question in other text); else the final call's
    last user message."""
    root = root_of(spans)
    if root is not None and root.kind != "LLM":
        value = root.attributes.get("input.value")
        if isinstance(value, str) and value != REDACTED:
            if root.attributes.get("input.mime_type") != "application/json":
                return value
            asked = _question_variable(value)
            if asked:
                return asked
    last_user = next((m for m in reversed(final.inputs) if m.role == "user" and m.content), None)
    return "" if last_user is None or last_user.content == REDACTED else last_user.content


def _question_variable(value: str) -> str | None:
    try:
        data = json.loads(value)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    return next((data[k] for k in _QUESTION_KEYS if isinstance(data.get(k), str) and data[k].strip()), None)


#: Where a span names its conversation: OpenInference, the OTel GenAI conventions, OpenLLMetry's association property.
_SESSION_KEYS = ("session.id", "gen_ai.conversation.id", "traceloop.association.properties.session_id")


def session_of(spans: list[Span]) -> str | None:
    """The audited conversation the trace is a turn of: the session it names (OpenInference's `session.id`, else
    the GenAI `gen_ai.conversation.id`, else OpenLLMetry's `traceloop.association.properties.session_id`) within
    its service, as `conversation_key` keys it (None: no session, a turn on its own). The one place a span's
    session becomes a stored conversation id."""
    for key in _SESSION_KEYS:
        found = next((s.attributes[key] for s in spans if isinstance(s.attributes.get(key), str) and s.attributes[key]),
                     None)
        if found is not None:
            return conversation_key(next((s.service for s in spans if s.service), None), found)
    return None


def current_from(inputs: tuple[Message, ...]) -> int:
    """Index (into `inputs`) where this turn's own part of the prompt starts: its last user message. Earlier
    messages other than system prompts are earlier turns of the conversation, in context."""
    for i in range(len(inputs) - 1, -1, -1):
        if inputs[i].role == "user":
            return i
    return 0
