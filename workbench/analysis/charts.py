"""The notebooks' plotly charts: set sizes, judge calibration, usage (experiment runs: `experiments.py`)."""

from __future__ import annotations

import re
from pathlib import PurePath

import pandas as pd

from ..render.escaping import plotly_text
from ..render.sources import SETS, SET_COLORS

def set_sizes_figure(sizes: pd.DataFrame, title: str = "Mean set size per configuration"):
    """Grouped bars: mean size of each set per configuration (every configuration column of `sizes`, the provider
    options too), each named by the fields that differ between them, the shared ones in the title; the gap
    between grey and green is the lie."""
    import plotly.graph_objects as go

    config = [c for c in CONFIG_COLUMNS if c in sizes.columns and c not in ("run_id", "run", "name", "run_name")]
    means = sizes.groupby(config, sort=False, dropna=False)[list(SETS)].mean()
    names, shared = row_labels(means.index.to_frame(index=False), config)
    fig = go.Figure()
    for name in SETS:
        fig.add_bar(name=name, x=[plotly_text(n) for n in names], y=list(means[name].round(2)),
                    marker_color=SET_COLORS[name])
    fig.update_layout(barmode="group", title=plotly_text(f"{title} ({shared})" if shared else title),
                      yaxis_title="documents per turn (mean)", height=420)
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

    df = usage.head(top).iloc[::-1]  # plotly draws the first row at the bottom
    labels = [plotly_text(f"{t or d} ({d})") for t, d in zip(df["title"], df["doc_id"])]
    fig = go.Figure()
    for column, name, color in USAGE_BARS:
        fig.add_bar(name=name, y=labels, x=list(df[column]), orientation="h", marker_color=color)
    fig.update_layout(barmode="group", title=title, xaxis_title="turns", height=max(320, 28 * len(df) + 120),
                      legend_title_text="", margin=dict(l=10, r=10, t=50, b=40))
    return fig


# --- query results: one measure per chart, configurations named by every field that differs --------

#: Columns that name a configuration or a run rather than measure something: a chart's labels, never its
#: bars (`k` is a number, but a run parameter).
CONFIG_COLUMNS = ("name", "run_name", "run_id", "run", "kind", "provider", "model", "retriever", "mode", "k", "tool_protocol",
                  "options")
#: A time bucket's width by the name `date_trunc` gives it (the column's name in the canned queries).
BUCKETS = {"second": pd.Timedelta(seconds=1), "minute": pd.Timedelta(minutes=1), "hour": pd.Timedelta(hours=1),
           "day": pd.Timedelta(days=1), "week": pd.Timedelta(days=7), "month": pd.Timedelta(days=31)}


def split_columns(df: pd.DataFrame) -> tuple[list[str], list[str]]:
    """The columns that label (text, booleans, times, configuration fields) and those that measure (numbers)."""
    labels, measures = [], []
    for c in df.columns:
        numeric = pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])
        (measures if numeric and str(c) not in CONFIG_COLUMNS else labels).append(str(c))
    return labels, measures


def row_labels(df: pd.DataFrame, columns: list[str]) -> tuple[list[str], str]:
    """Each row named by the `columns` whose values differ between rows (all of them when none does), and
    the parts every row shares, once. A number is named with its column (`k 5`), text by its value."""
    def part(col: str, value) -> str:
        return f"{col} {value}" if not isinstance(value, str) else value

    varying = [c for c in columns if df[c].astype(str).nunique() > 1] or columns[:1]
    shared = [part(c, df[c].iloc[0]) for c in columns if c not in varying and len(df)]
    names = [" · ".join(part(c, v) for c, v in zip(varying, row)) for row in df[varying].itertuples(index=False)]
    return names, " · ".join(shared)


#: The longest label part a chart draws; the whole value is on hover.
LABEL_CHARS = 32
#: A run id as the store writes it (`uuid4().hex`): drawn by its first 8 characters.
_RUN_ID = re.compile(r"[0-9a-f]{32}")


def short_label(name: str) -> str:
    """`name` (one row's label, parts joined by " · ") as a chart draws it: a file path by its file name (a
    GGUF model), a run id by its first 8 characters, any part longer than `LABEL_CHARS` cut with "…"."""
    parts = []
    for p in name.split(" · "):
        if _RUN_ID.fullmatch(p):
            p = p[:8] + "…"
        elif ("/" in p or "\\" in p) and " " not in p and PurePath(p).name:
            p = PurePath(p.replace("\\", "/")).name
        parts.append(p if len(p) <= LABEL_CHARS else p[:LABEL_CHARS - 1] + "…")
    return " · ".join(parts)


def short_labels(names: list[str]) -> list[str]:
    """`short_label` of each name, unless two different names would then read the same: then the names."""
    short = [short_label(n) for n in names]
    return short if len(set(short)) == len(set(names)) else list(names)


def time_axis(values: pd.Series, bucket: str | None = None) -> dict:
    """Plotly x-axis settings for time buckets: a single bucket gets one tick naming it, over a range of one
    bucket on either side (plotly alone zooms into milliseconds around it); more get plotly's own ticks."""
    times = pd.to_datetime(values.dropna().unique())
    if len(times) != 1:
        return {}
    width = BUCKETS.get((bucket or "").lower(), BUCKETS["hour"])
    t = times[0]
    fmt = "%Y-%m-%d" if width >= BUCKETS["day"] else "%Y-%m-%d %H:%M"
    return {"range": [t - width, t + width], "tickvals": [t], "ticktext": [t.strftime(fmt)], "type": "date"}


def measure_figure(df: pd.DataFrame, measure: str, height: int = 320):
    """One chart of one measure: bars per row named by the labelling columns that differ (what the rows
    share goes in the title), or, when the first column is a time, a line per series over time."""
    import plotly.graph_objects as go

    labels, _ = split_columns(df)
    first = str(df.columns[0])
    fig = go.Figure()
    if pd.api.types.is_datetime64_any_dtype(df[first]):
        rest = [c for c in labels if c != first]
        series = df.assign(_series=row_labels(df, rest)[0] if rest else measure)
        for name, g in series.groupby("_series", sort=False):
            fig.add_scatter(x=list(g[first]), y=list(g[measure]), mode="lines+markers", name=plotly_text(str(name)))
        fig.update_xaxes(title=plotly_text(first), **time_axis(df[first], first))
        title = measure
    else:
        names, shared = row_labels(df, labels) if labels else ([str(i) for i in range(len(df))], "")
        title = f"{measure} · all: {shared}" if shared else measure
        _bars(fig, names, list(df[measure]), measure, height)
        return _layout(fig, title, height if fig.data[0].orientation != "h" else fig.layout.height)
    fig.update_yaxes(rangemode="tozero")  # counts over time: one point, or a flat line, still reads from 0
    fig.update_layout(yaxis_title=plotly_text(measure))
    return _layout(fig, title, height)


#: Bars turn horizontal when a label is longer than this, or there are more rows than `_UPRIGHT_ROWS`:
#: labels then read left to right beside their bar instead of diagonally under a squeezed plot.
_UPRIGHT_LABEL = 16
_UPRIGHT_ROWS = 8


def _bars(fig, names: list[str], values: list, measure: str, height: int) -> None:
    """One bar per row, labelled by its short name, its whole name and value on hover."""
    short = short_labels(names)
    text = [f"{v:.3g}" if isinstance(v, float) else v for v in values]
    common = dict(name=plotly_text(measure), text=text, textposition="outside", cliponaxis=False,
                  hovertext=[plotly_text(n) for n in names], hoverinfo="text+x+y")
    if max(map(len, short), default=0) <= _UPRIGHT_LABEL and len(short) <= _UPRIGHT_ROWS:
        fig.add_bar(x=[plotly_text(n) for n in short], y=values, **common)
        fig.update_layout(yaxis_title=plotly_text(measure))
        return
    # plotly draws the first row at the bottom: reversed, so the table's first row is the top bar
    fig.add_bar(y=[plotly_text(n) for n in short][::-1], x=values[::-1], orientation="h",
                **common | {"text": text[::-1], "hovertext": common["hovertext"][::-1]})
    fig.update_yaxes(automargin=True)
    fig.update_layout(xaxis_title=plotly_text(measure), height=max(height, 26 * len(short) + 80))


def _layout(fig, title: str, height: int):
    fig.update_layout(height=height, margin=dict(l=0, r=0, t=30, b=0), showlegend=len(fig.data) > 1,
                      title=dict(text=plotly_text(title), font=dict(size=13)), legend_title_text="")
    return fig


def over_time_figure(df: pd.DataFrame, x: str, y: str, color: str | None = None, title: str | None = None):
    """Bars of `y` per time bucket `x` (named as `date_trunc` names it: minute, hour, day, …), one colour per
    `color`: each bar one bucket wide, and a single bucket with one tick naming it (`time_axis`)."""
    import plotly.express as px

    fig = px.bar(df, x=x, y=y, color=color, title=title)
    width = BUCKETS.get(x.lower(), BUCKETS["hour"])
    fig.update_traces(width=width.total_seconds() * 1000 * 0.8)  # a date axis measures bar widths in ms
    fig.update_xaxes(**time_axis(df[x], x))
    return fig
