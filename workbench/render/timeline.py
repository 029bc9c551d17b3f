"""A turn's model and tool calls on one time axis (the app's tool-call timeline)."""

from __future__ import annotations

import json
from typing import Any

#: Longest argument value shown in a tool call's one-line signature; a longer one ends in "…".
MAX_ARG_CHARS = 120


def call_signature(name: str, args: dict[str, Any] | None) -> str:
    """A tool call as one line, its arguments visible: `search(query="How do I configure SSO?", k=5)`.
    Plain text (escape it for markdown, `plotly_text` it for a chart)."""

    def shown(value: Any) -> str:
        text = json.dumps(value, ensure_ascii=False)
        return text if len(text) <= MAX_ARG_CHARS else text[:MAX_ARG_CHARS - 1] + "…"

    return f"{name}(" + ", ".join(f"{k}={shown(v)}" for k, v in (args or {}).items()) + ")"


def timeline(record: Any) -> list[dict[str, Any]]:
    """A turn's model and tool calls on one time axis from the turn's start, in the order the agent loop ran
    them (model call 1, the tool calls it asked for, model call 2, …; excerpt mode: the retrieval of the
    excerpts, then the model call), each as long as its recorded latency — the layout of the trace's spans
    (workbench/trace/spans.py). Rows: `kind` (model | tool | retrieval), `label`, `detail`, `start_ms`, `ms`."""
    rows: list[dict[str, Any]] = []
    clock = 0.0

    def add(kind: str, label: str, ms: float | None, detail: str = "") -> None:
        nonlocal clock
        ms = max(0.0, ms or 0.0)
        rows.append({"kind": kind, "label": label, "detail": detail, "start_ms": clock, "ms": ms})
        clock += ms

    models = list(record.model_calls)
    if record.excerpts:
        add("retrieval", f"retrieve {len(record.excerpts)} excerpts",
            (record.latency_ms or 0) - sum(c.latency_ms or 0 for c in models))
    tools = iter(enumerate(record.tool_calls, start=1))

    def tool(n: int, call: Any) -> None:
        cut = f" · cut: {call.cut.reason}" if getattr(call, "cut", None) is not None else ""
        add("tool", f"#{n} {call.name}", call.latency_ms, call_signature(call.name, call.args) + cut)

    for i, call in enumerate(models, start=1):
        add("model", f"model call {i}", call.latency_ms, " · ".join(
            x for x in (call.model, call.finish_reason and f"finish {call.finish_reason}") if x))
        for _ in range(call.n_tool_calls or 0):
            nxt = next(tools, None)
            if nxt is not None:
                tool(*nxt)
    for nxt in tools:  # a record without per-call tool counts: the tool calls end to end
        tool(*nxt)
    return rows
