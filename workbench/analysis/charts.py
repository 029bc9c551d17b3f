"""The notebooks' plotly charts: set sizes, judge calibration, usage (experiment runs: `experiments.py`)."""

from __future__ import annotations

import pandas as pd

from ..render import SET_COLORS, SETS
from .sets import ROW_LABELS

def _config_label(df: pd.DataFrame) -> pd.Series:
    return df["retriever"] + " · " + df["provider"] + " · " + df["mode"]


def set_sizes_figure(sizes: pd.DataFrame, title: str = "Mean set size per configuration"):
    """Grouped bars: mean size of each set per configuration; the gap between grey and green is the lie."""
    import plotly.graph_objects as go

    df = sizes.assign(config=_config_label(sizes))
    means = df.groupby("config", sort=False)[list(SETS)].mean()
    fig = go.Figure()
    for name in SETS:
        fig.add_bar(name=name, x=list(means.index), y=list(means[name].round(2)), marker_color=SET_COLORS[name])
    fig.update_layout(barmode="group", title=title, yaxis_title="documents per turn (mean)",
                      xaxis_title="retriever · provider · mode", height=420)
    return fig


#: The load-bearing row: the consulted colour, darker (a subset of it).
LOAD_BEARING_COLOR = "#1a6b1a"


def calibration_figure(table: pd.DataFrame, title: str = "Judge score vs share labelled Complete"):
    """Reliability diagram: one line per judge over score bins, marker size by claim count."""
    import plotly.graph_objects as go

    fig = go.Figure()
    fig.add_scatter(x=[0, 1], y=[0, 1], mode="lines", name="perfect calibration",
                    line={"dash": "dot", "color": "gray"})
    for name, g in table.groupby("judge", sort=False):
        fig.add_scatter(x=list(g["mean_score"]), y=list(g["frac_complete"]), mode="lines+markers", name=name,
                        text=[f"n={n}" for n in g["n"]], marker={"size": [4 + n ** 0.5 for n in g["n"]]})
    fig.update_layout(title=title, xaxis_title="judge score (bin mean)", yaxis_title="fraction Complete",
                      xaxis_range=[0, 1], yaxis_range=[0, 1], height=450)
    return fig


#: The usage chart's bars: (doc_usage column, legend, colour). Cited means cited after reading; a link in a
#: title-only listing gets its own bar (a light blue), never the cited one.
USAGE_BARS = (("retrieved_turns", "retrieved", SET_COLORS["retrieved"]),
              ("cited_read_turns", "cited (read)", SET_COLORS["cited"]),
              ("listed_link_turns", "linked from a listing", "#a6c8ec"),
              ("consulted_turns", "consulted", SET_COLORS["consulted"]))


def usage_figure(usage: pd.DataFrame, top: int = 15, title: str = "Most-used documents: turns per set"):
    """Horizontal grouped bars for the `top` most consulted documents: retrieved, cited-after-reading,
    listed-link and consulted turns.

    Titles are corpus text: entity-escaped so plotly draws them literally (it renders `<a href>` in labels)."""
    import plotly.graph_objects as go

    from ..render import plotly_text

    df = usage.head(top).iloc[::-1]  # plotly draws the first row at the bottom
    labels = [plotly_text(f"{t or d} ({d})") for t, d in zip(df["title"], df["doc_id"])]
    fig = go.Figure()
    for column, name, color in USAGE_BARS:
        fig.add_bar(name=name, y=labels, x=list(df[column]), orientation="h", marker_color=color)
    fig.update_layout(barmode="group", title=title, xaxis_title="turns", height=max(320, 28 * len(df) + 120),
                      legend_title_text="", margin=dict(l=10, r=10, t=50, b=40))
    return fig
