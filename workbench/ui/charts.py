"""A turn's plotly charts: the sizes of its three sets and the timeline of its model and tool calls, each figure
built once per set of numbers (every rerun redraws every turn)."""

from __future__ import annotations

import functools

import streamlit as st

from ..render.escaping import plotly_text
from ..render.sources import REJECTED_COLOR, SET_COLORS, SETS
from ..render.timeline import timeline
from . import audited
from .records import Turn


@functools.lru_cache(maxsize=256)
def sizes_figure(sizes: tuple[int, ...]):
    """The sizes bar chart, built once per set of sizes: every rerun redraws every turn (benchmarks/app_speed.py)."""
    import plotly.graph_objects as go

    names = list(SETS) + ["rejected"]
    fig = go.Figure(go.Bar(x=list(sizes), y=names, orientation="h", text=list(sizes),
                           marker_color=[SET_COLORS.get(n, REJECTED_COLOR) for n in names]))
    fig.update_layout(height=170, margin=dict(l=0, r=10, t=10, b=0), yaxis=dict(autorange="reversed"),
                      xaxis=dict(dtick=1))
    return fig


#: The timeline's bar colour per kind of call.
CALL_COLORS = {"model": "#7f5fbf", "tool": "#f28e2b", "retrieval": SET_COLORS["retrieved"]}


def call_timeline(turn: Turn) -> None:
    """Model calls and tool calls on one time axis with their latencies: the span view of Phoenix or Langfuse."""
    rows = audited.timeline_rows(turn) or timeline(turn.answer.record)
    if not rows:
        return
    fig = timeline_figure(tuple((r["kind"], r["label"], r["detail"], r["start_ms"], r["ms"]) for r in rows))
    st.plotly_chart(fig, width="stretch", config={"displayModeBar": False}, key=f"timeline-{turn.turn_id}")


@functools.lru_cache(maxsize=256)
def timeline_figure(rows: tuple[tuple[str, str, str, float, float], ...]):
    """The timeline's figure, built once per set of rows (every click reruns the page; figures are dear)."""
    import plotly.graph_objects as go

    fig = go.Figure(go.Bar(
        y=[plotly_text(label) for _, label, _, _, _ in rows], x=[ms for *_, ms in rows],
        base=[start for _, _, _, start, _ in rows], orientation="h",
        marker_color=[CALL_COLORS[kind] for kind, *_ in rows],
        text=[f"{ms:.1f} ms" for *_, ms in rows], textposition="outside", cliponaxis=False,
        hovertext=[plotly_text(detail or label) for _, label, detail, _, _ in rows], hoverinfo="text+x"))
    fig.update_layout(height=60 + 26 * len(rows), margin=dict(l=0, r=40, t=24, b=0), showlegend=False,
                      title=dict(text="Timeline (ms from the turn's start)", font=dict(size=13)),
                      yaxis=dict(autorange="reversed", type="category"), xaxis=dict(rangemode="tozero"))
    return fig
