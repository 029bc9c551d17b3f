"""A turn's tool calls and what each returned (docs/design.md §12 *Tool calls*).

One call per call the model requested (its tool-call id): a TOOL span (OpenInference, or a GenAI `execute_tool`
span) and the model's request for the same call are one call, with the arguments the model sent; a TOOL span that
names no id is the first request of its tool not yet taken. A RETRIEVER or RERANKER span nested in a TOOL span is
that call's results, not a call of its own; one nested in no tool (a query engine's retriever) is a call of its
own. A tool result message of a model input whose call a TOOL span already gave adds nothing; one with no TOOL
span (a bare client runs its tools unseen) is its call's result.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .measure import normalize as normalize_space
from .shapes import Message, SpanToolRequest
from .spans import Span
from .turns import SpanCall
from .units import Origin, Unit, reranker_inputs, span_units, tool_span, tool_units, unwrapped


@dataclass
class Call:
    """One tool call (or retriever on its own): where its units came from, its result text, its units."""

    origin: Origin
    text: str | None = None
    nested: list[Unit] = field(default_factory=list)
    units: list[Unit] = field(default_factory=list)
    start: int = 0  # when it ran: its span's start, or the start of the first model call whose input holds it


def turn_calls(spans: list[Span], parts: list[tuple[int, SpanCall, list[Message]]]) -> list[Call]:
    """The turn's calls in the order they ran, each with its units (`parts`: each model call with this turn's part
    of its input)."""
    requests = _requests(parts)
    by_span = {s.span_id: s for s in spans}
    ordered = sorted(spans, key=lambda s: (s.start_ns, s.end_ns))
    out: list[Call] = []
    of_span: dict[str, Call] = {}
    by_id: dict[str, Call] = {}
    taken: set[str] = set()
    for s in ordered:
        if s.kind != "TOOL":
            continue
        outer = _ancestor(s, by_span, of_span)
        if outer is not None:  # a tool span inside a tool span (a framework's wrapper): the same call
            of_span[s.span_id] = outer
            outer.text = outer.text if outer.text is not None else tool_span(s).output
            continue
        t = tool_span(s)
        call_id = t.call_id or next((r.call_id for r in requests if r.name == t.name and r.call_id
                                     and r.call_id not in taken), None)
        if call_id is not None and call_id in by_id:
            of_span[s.span_id] = by_id[call_id]
            continue
        r = next((r for r in requests if call_id is not None and r.call_id == call_id), None)
        taken.add(call_id or "")
        call = Call(Origin(name=(r.name if r and r.name else t.name), kind="TOOL", args=r.args if r else t.args,
                           call_id=call_id), text=t.output, start=s.start_ns)
        out.append(call)
        of_span[s.span_id] = call
        if call_id is not None:
            by_id[call_id] = call
    for s in ordered:
        if s.kind in ("RETRIEVER", "RERANKER"):
            outer = _ancestor(s, by_span, of_span)
            if outer is not None:
                outer.nested += [*span_units(s, outer.origin), *reranker_inputs(s, outer.origin)]
            else:
                origin = Origin(name=s.name, kind=s.kind)
                out.append(Call(origin, nested=[*span_units(s, origin), *reranker_inputs(s, origin)], start=s.start_ns))
    _results(out, by_id, requests, parts)
    out.sort(key=lambda c: c.start)  # stable: calls of one moment keep the order they were found in
    for call in out:
        call.units = _units(call)
    return out


def _requests(parts: list[tuple[int, SpanCall, list[Message]]]) -> list[SpanToolRequest]:
    """Every tool call the turn's model calls asked for (their outputs, and assistant messages of this turn's part
    of their inputs: a bare client's earlier steps; an earlier turn's calls are not this turn's), each once: by
    its id, or by its name and arguments when it has none (Gemini's calls carry no id)."""
    out, seen = [], set()
    for _, c, msgs in parts:
        for r in (*(r for m in msgs for r in m.tool_calls), *c.requests):
            key = r.call_id if r.call_id is not None else (r.name, normalize_space(r.arguments))
            if key not in seen:
                seen.add(key)
                out.append(r)
    return out


def _ancestor(span: Span, by_span: dict[str, Span], of_span: dict[str, Call]) -> Call | None:
    """The call of the nearest TOOL span above `span`, or None."""
    parent, hops = span.parent_id, 0
    while parent is not None and hops < 1000:
        if parent in of_span:
            return of_span[parent]
        s = by_span.get(parent)
        parent, hops = (s.parent_id if s is not None else None), hops + 1
    return None


def _results(out: list[Call], by_id: dict[str, Call], requests: list[SpanToolRequest],
             parts: list[tuple[int, SpanCall, list[Message]]]) -> None:
    """Tool result messages of this turn's model inputs: each the result of its call (a new call when no TOOL
    span gave it). A result that names no call id (Gemini, an instrumentor that drops it) answers the first request
    not yet answered, of its tool's name when it names its tool."""
    texts = {normalize_space(unwrapped(c.text)) for c in out if c.text}
    answered = {i for i, r in enumerate(requests) if r.call_id is not None and r.call_id in by_id}
    for _, model_call, msgs in parts:
        for m in msgs:
            if m.role != "tool" or not m.content:
                continue
            call = by_id.get(m.tool_call_id) if m.tool_call_id else None
            if call is not None:
                call.text = call.text if call.text is not None else m.content
                continue
            key = normalize_space(unwrapped(m.content))
            if key in texts:
                continue
            texts.add(key)
            r = _answered_request(m, requests, answered)
            call_id = m.tool_call_id or (r.call_id if r else None)
            call = Call(Origin(name=r.name if r else m.name or "tool", kind="TOOL", args=r.args if r else {},
                               call_id=call_id), text=m.content, start=model_call.span.start_ns - 1)
            out.append(call)
            if call_id:
                by_id[call_id] = call


def _answered_request(m: Message, requests: list[SpanToolRequest], answered: set[int]) -> SpanToolRequest | None:
    """The request tool result `m` answers: the one of its call id; without one, the first not yet answered (of
    its tool's name when it names it)."""
    for i, r in enumerate(requests):
        if m.tool_call_id and r.call_id == m.tool_call_id or not m.tool_call_id and i not in answered \
                and (m.name is None or r.name == m.name):
            answered.add(i)
            return r
    return None


def _units(call: Call) -> list[Unit]:
    """A call's units: its result's, then its nested retrievers'. A text result that names no document is a unit
    of its own, unless it is made of its nested retrievers' units (their texts are in it): then those units are
    its documents."""
    if call.text is None:
        return list(call.nested)
    own = tool_units(call.text, call.origin, call.nested)
    if len(own) == 1 and own[0].unnamed and call.nested:
        text = normalize_space(own[0].content)
        if any(normalize_space(u.content) in text for u in call.nested if u.content.strip()):
            return list(call.nested)
    return [*own, *call.nested]
