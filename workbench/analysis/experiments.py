"""Experiment runs as tables and a chart (docs/experiments.md): the leaderboard with its 95 % intervals,
the per-question diff, and error bars. Scoring itself is `workbench.trace.scoring`; this only lays it out
for notebook 02 and the app's Experiments page."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from ..render.escaping import plotly_text
from ..render.sources import SET_COLORS
from .charts import LOAD_BEARING_COLOR
from .sets import ROW_LABELS

#: The leaderboard's figures with their labels, in column order.
LEADERBOARD_FIGURES = {"pass_rate": "pass rate", "consulted_precision": "consulted precision",
                       "consulted_recall": "consulted recall", "load_bearing_precision": "load-bearing precision",
                       "load_bearing_recall": "load-bearing recall", "rejected": "rejected per turn"}
#: What the error-bar chart draws (all in [0, 1]).
CHARTED = {"pass_rate": "#555555", "consulted_precision": SET_COLORS["consulted"],
           "consulted_recall": "#7fbf7f"}


def compare_runs(db: str | Path, runs: Sequence[str]) -> dict[str, Any]:
    """`{"runs": [...], "diff": [...]}` of the named runs (`workbench runs compare --json`)."""
    from ..trace.scoring import compare

    return compare(db, runs)


def leaderboard_table(result: dict[str, Any]) -> pd.DataFrame:
    """One row per run: its configuration, corpus, dataset, tags and each figure with its interval."""
    from ..trace.experiments import tags_text

    rows = []
    for r in result["runs"]:
        row = {"run": r["name"] if r["name"] != r["run_id"] else r["label"], "provider": r["provider"],
               "model": r["model"], "retriever": r["retriever"], "mode": r["mode"], "k": r["k"], "corpus": r["corpus"],
               "dataset": r["dataset"], "tags": tags_text(r.get("tags")), "questions": r["questions"],
               "passed": r["passed"]}
        for figure, label in LEADERBOARD_FIGURES.items():
            ci = r["ci"][figure]
            row[label] = None if r[figure] is None else round(r[figure], 3)
            row[f"{label} 95% CI"] = None if ci is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]"
        row["latency p50 (ms)"] = r["latency_p50_ms"]
        row["latency p90 (ms)"] = r["latency_p90_ms"]
        rows.append(row)
    return pd.DataFrame(rows)


def diff_table(result: dict[str, Any], link: str | None = None) -> pd.DataFrame:
    """One row per changed line: its question (and conversation, when a line has one), expected, then passed and
    consulted per run; with `link` (a URL prefix such
    as `?turn=`), a link to each run's turn."""
    names = [r["name"] for r in result["runs"]]
    conversations = any(d.get("conversation") is not None for d in result["diff"])
    rows = []
    for d in result["diff"]:
        row: dict[str, Any] = {"question": d["question"]}
        if conversations:  # two conversations may ask the same follow-up: the line is its conversation's
            row["conversation"] = d.get("conversation")
        row["expected"] = ", ".join(d["expected"])
        for n in names:
            row[f"{n}: passed"] = d["passed"][n]
        for n in names:
            c = d["consulted"][n]
            row[f"{n}: consulted"] = "(not asked)" if c is None else ", ".join(c) or "(none)"
        if link is not None:
            for n in names:
                tid = d["turn_id"][n]
                row[f"{n}: turn"] = f"{link}{tid}" if tid else None
        rows.append(row)
    return pd.DataFrame(rows)


def _bars(result: dict[str, Any], figures: dict[str, tuple[str, str]], title: str, axis: str):
    """Grouped bars per run, one trace per figure (label, colour), with each figure's interval as error bars;
    a figure no run has is left out."""
    import plotly.graph_objects as go

    fig = go.Figure()
    names = [plotly_text(r["label"]) for r in result["runs"]]
    for figure, (label, color) in figures.items():
        values = [r[figure] for r in result["runs"]]
        if all(v is None for v in values):
            continue
        cis = [r["ci"][figure] or [v, v] for r, v in zip(result["runs"], values)]
        fig.add_bar(name=label, x=names, y=values, marker_color=color,
                    error_y=dict(type="data", symmetric=False,
                                 array=[(c[1] - v) if v is not None else 0 for c, v in zip(cis, values)],
                                 arrayminus=[(v - c[0]) if v is not None else 0 for c, v in zip(cis, values)]))
    fig.update_layout(barmode="group", title=title, yaxis=dict(range=[0, 1.05], title=axis), height=420,
                      legend_title_text="")
    return fig


def leaderboard_figure(result: dict[str, Any], title: str = "Runs against their expectations (95% bootstrap intervals)"):
    """Grouped bars per run — pass rate, consulted precision and recall — with the intervals as error bars."""
    return _bars(result, {f: (LEADERBOARD_FIGURES[f], color) for f, color in CHARTED.items()}, title, "share")


def question_table(db: str | Path, run_ids: Sequence[str]) -> pd.DataFrame:
    """Per run and question: passed, each assertion, the retrieved / consulted / load-bearing sets against
    `expected` and the per-turn figures (the `expectation_results` view, docs/experiments.md)."""
    from ..trace.experiments import list_runs, run_label
    from ..trace.scoring import question_rows

    labels = {r["run_id"]: run_label(r) for r in list_runs(db)}
    df = pd.DataFrame(question_rows(db, list(run_ids)))
    return df.assign(run=df["run_id"].map(labels)) if len(df) else df


#: The three rows a run can show, as figure prefixes, labels and colours: the naive row (retrieved), the honest
#: row (consulted) and the load-bearing row (verified turns).
ROWS = {"retrieved": (ROW_LABELS["naive"], SET_COLORS["retrieved"]),
        "consulted": (ROW_LABELS["honest"], SET_COLORS["consulted"]),
        "load_bearing": (ROW_LABELS["load_bearing"], LOAD_BEARING_COLOR)}


def rows_figure(result: dict[str, Any], measure: str = "precision",
                title: str = "Precision against expected documents: naive, honest and load-bearing rows"):
    """Grouped bars per run: `measure` (precision or recall) of each row against `expected`, with 95 % intervals."""
    return _bars(result, {f"{row}_{measure}": spec for row, spec in ROWS.items()}, title, measure)


def rows_table(result: dict[str, Any]) -> pd.DataFrame:
    """Per run and row (naive, honest, load-bearing where verified): precision and recall against `expected`, each
    with its 95 % interval — the table behind `rows_figure`."""
    out = []
    for r in result["runs"]:
        for row, (label, _) in ROWS.items():
            if r[f"{row}_precision"] is None and r[f"{row}_recall"] is None:
                continue
            entry: dict[str, Any] = {"run": r["label"], "row": label}
            for measure in ("precision", "recall"):
                value, ci = r[f"{row}_{measure}"], r["ci"][f"{row}_{measure}"]
                entry[measure] = None if value is None else round(value, 3)
                entry[f"{measure} 95% CI"] = None if ci is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]"
            out.append(entry)
    return pd.DataFrame(out)
